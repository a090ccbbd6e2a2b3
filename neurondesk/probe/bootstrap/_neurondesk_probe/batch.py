"""Steps in columns: the transport coalesces consecutive ordinary steps into one `steps` message
(neurondesk's StepBatch event), so that the recorder decodes, checks, journals and reduces a few
hundred steps in one go instead of one line each. Its wire form:

  {"kind":"steps","t":<last step's end>,"pid":P,"step":<first index>,"ts":[...],"duration_s":[...],
   "data_wait_s":[...](,"samples":[...])(,"tokens":[...])(,"executions":[...])(,"presync_s":[...])
   (,"phase_cols":[<h2d>,<forward>,<backward>,<optimizer>,<sync>,<collective>])
   (,"input_shapes":[[...],...])(,"dropped_before":<messages dropped so far>)}

A phase column is the phase's time in each step, or 0 when it is zero in every step of the batch
(no h2d on a CPU, no sync off XLA, no collective in one process): the training thread formats only
the phases that happened, each number costing it about 0.2 us.

Consecutive steps join a batch when they have the same fields and input shapes; a step that
compiled, ran an evaluation or carries a non-int count goes as a `step` message of its own.
"""

from __future__ import annotations

import json

MAX_STEPS = 4096  # a batch is closed (rendered into the send buffer) at this many steps


def _phase_col(col: tuple) -> str:
    """One phase's column: its time in each step, or 0 when it is zero in every one."""
    return "[" + ",".join([f"{x:.6f}" for x in col]) + "]" if any(col) else "0"


class StepColumns:
    def __init__(self) -> None:
        self.n = 0
        self.first = 0
        self.shape_of: tuple = ()  # (samples?, tokens?, executions?, presync?, phases?) present
        self.shapes: list | None = None
        self.ts: list[float] = []
        self.duration: list[float] = []
        self.wait: list[float] = []
        self.samples: list[int] = []
        self.tokens: list[int] = []
        self.execs: list[int] = []
        self.presync: list[float] = []
        self.phases: list[tuple] = []  # per step: (h2d, forward, backward, optimizer, sync, collective)

    def fits(self, step: int, shape_of: tuple, shapes) -> bool:
        """Whether a step of these fields and shapes continues this batch."""
        return (self.n < MAX_STEPS and step == self.first + self.n and shape_of == self.shape_of
                and shapes == self.shapes)

    def start(self, step: int, shape_of: tuple, shapes) -> None:
        self.n, self.first, self.shape_of, self.shapes = 0, step, shape_of, shapes
        self.ts, self.duration, self.wait = [], [], []
        self.samples, self.tokens, self.execs, self.presync, self.phases = [], [], [], [], []

    def add(self, t: float, duration: float, wait: float, samples: int, tokens: int, execs: int | None,
            presync: float | None, phases: tuple | None = None) -> None:
        self.n += 1
        self.ts.append(t)
        self.duration.append(duration)
        self.wait.append(wait)
        if samples:
            self.samples.append(samples)
            if tokens:
                self.tokens.append(tokens)
        if execs is not None:
            self.execs.append(execs)
        if presync is not None:
            self.presync.append(presync)
        if phases is not None:
            self.phases.append(phases)

    def render(self, pid: int, dropped: int) -> bytes:
        """The batch as one line (``dropped``: messages dropped so far, said as a step line says
        it); the columns are then empty."""
        ts = self.ts
        has_samples, has_tokens, has_execs, has_presync, has_phases = self.shape_of
        parts = [f'{{"kind":"steps","t":{ts[-1]:.6f},"pid":{pid},"step":{self.first},"ts":[',
                 ",".join([f"{x:.6f}" for x in ts]),
                 '],"duration_s":[', ",".join([f"{x:.9f}" for x in self.duration]),
                 '],"data_wait_s":[', ",".join([f"{x:.9f}" for x in self.wait]), "]"]
        if has_samples:
            parts += [',"samples":[', ",".join(map(str, self.samples)), "]"]
        if has_tokens:
            parts += [',"tokens":[', ",".join(map(str, self.tokens)), "]"]
        if has_execs:
            parts += [',"executions":[', ",".join(map(str, self.execs)), "]"]
        if has_presync:
            parts += [',"presync_s":[', ",".join([f"{x:.9f}" for x in self.presync]), "]"]
        if has_phases:
            parts += [',"phase_cols":[', ",".join([_phase_col(col) for col in zip(*self.phases)]), "]"]  # noqa: B905 - no strict= before Python 3.10, where the probe loads too
        if self.shapes is not None:
            parts += [',"input_shapes":', json.dumps(self.shapes, separators=(",", ":"))]
        if dropped:
            parts.append(f',"dropped_before":{dropped}')
        parts.append("}\n")
        self.n = 0
        return "".join(parts).encode()
