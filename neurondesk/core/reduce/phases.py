"""Step phases, per process: the sums over its steady steps of the step time, the data wait and
the six phases the probe times (StepEnded.phases_s: h2d, forward, backward, optimizer, sync,
collective), and the lead's recent steps for the console's stacked bars. What they mean on each
backend, and the split a person reads, is core/figures/phases.py's.

A step counts when it is steady (core/reduce/steps.py's rule: past the warm-up, nothing compiled in
it) and carries phases; the sums add in step order, a batch as its steps one by one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from operator import add

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.ranks import RankReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import COLUMNS_FROM, StepReducer

RECENT = 120  # the lead's latest steps kept for the stacked bars


@dataclass(slots=True)
class PhaseSums:
    pid: int
    steps: int = 0  # steady steps with phases
    step_s: float = 0.0
    wait_s: float = 0.0
    phases: list[float] = field(default_factory=lambda: [0.0] * ev.PHASES_PER_STEP)
    xla: bool = False  # its steps count graph executions: lazy tensors


@dataclass(frozen=True, slots=True)
class PhaseStep:
    """One of the lead's recent steps: its time, data wait and phases (None: not timed)."""

    step: int
    duration_s: float
    data_wait_s: float
    phases: tuple[float, ...] | None
    steady: bool
    xla: bool = False  # its steps count graph executions: lazy tensors


class PhaseReducer:
    def __init__(self, run: RunReducer, steps: StepReducer, ranks: RankReducer) -> None:
        self._run, self._steps, self._ranks = run, steps, ranks
        self.by_pid: dict[int, PhaseSums] = {}
        self.recent: deque[PhaseStep] = deque(maxlen=RECENT)

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"step": self.on_step, "steps": self.on_steps}

    def on_step(self, e: ev.StepEnded) -> None:
        self._one(e.pid, e.step, e.duration_s, e.data_wait_s, e.phases_s, e.executions is not None, e.compiles > 0)

    def on_steps(self, b: ev.StepBatch) -> None:
        if b.phases_s is None and b.pid != self._steps._procs.lead_pid:
            return  # nothing to add up, and not the lead's (whose recent steps the bars show)
        xla = b.executions is not None
        if b.phases_s is not None and len(b) >= COLUMNS_FROM and self._all_steady(b.pid, b.step, len(b)):
            self._steady_batch(b, xla)
            return
        one, phases_of = self._one, b.phases_of
        for i, d, w in zip(range(len(b)), b.duration_s, b.data_wait_s, strict=True):
            one(b.pid, b.step + i, d, w, phases_of(i), xla, False)

    def _one(self, pid: int, step: int, duration: float, wait: float, phases: list[float] | None, xla: bool,
             compiled: bool) -> None:
        rank = self._ranks.ranks.get(pid)
        lead = pid == self._steps._procs.lead_pid
        compiled = (compiled or (rank is not None and step in rank.compiled_steps)
                    or (lead and step in self._steps.steps_with_compile))
        steady = step >= self._run.warmup_steps and not compiled
        if lead:
            self.recent.append(PhaseStep(step, duration, wait, tuple(phases) if phases else None, steady, xla))
        if not steady or not phases:
            return
        sums = self.by_pid.get(pid)
        if sums is None:
            sums = self.by_pid[pid] = PhaseSums(pid)
        sums.steps += 1
        sums.step_s += duration
        sums.wait_s += wait
        sums.xla = sums.xla or xla
        acc = sums.phases
        for k, x in enumerate(phases):
            acc[k] += x

    def _all_steady(self, pid: int, first: int, n: int) -> bool:
        if first < self._run.warmup_steps:
            return False
        rank = self._ranks.ranks.get(pid)
        marks = [rank.compiled_steps if rank is not None else set()]
        if pid == self._steps._procs.lead_pid:
            marks.append(self._steps.steps_with_compile)
        return not any(m and any(s in m for s in range(first, first + n)) for m in marks)

    def _steady_batch(self, b: ev.StepBatch, xla: bool) -> None:
        """``_one`` of each step of a batch that is steady throughout, column by column."""
        sums = self.by_pid.get(b.pid)
        if sums is None:
            sums = self.by_pid[b.pid] = PhaseSums(b.pid)
        n, cols, per = len(b), b.phases_s, ev.PHASES_PER_STEP
        sums.steps += n
        sums.step_s = reduce(add, b.duration_s, sums.step_s)  # in step order: the same sums to the bit
        sums.wait_s = reduce(add, b.data_wait_s, sums.wait_s)
        sums.xla = sums.xla or xla
        acc = sums.phases
        for k in range(per):
            acc[k] = reduce(add, cols[k::per], acc[k])
        if b.pid == self._steps._procs.lead_pid:
            k = max(0, n - RECENT)
            self.recent.extend(PhaseStep(b.step + i, b.duration_s[i], b.data_wait_s[i],
                                         tuple(cols[per * i:per * (i + 1)]), True, xla) for i in range(k, n))
