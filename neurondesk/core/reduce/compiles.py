"""Compiles, merged from four sources, and graph breaks.

- probe: the compile itself (duration, sync point, shapes); the reference when a probe runs.
- pt-xla-debug: the same compile seen in PT_XLA_DEBUG output; dropped when a probe reports it.
- neuron-log: the Neuron compiler's line adds the persistent-cache verdict and module hash to the
  probe's record (or stands alone without a probe). A named block of an export tool
  ("***** Compiling unet *****") always stands alone: those compiles run outside the graphs the
  probe watches.
- dynamo: the probe's dynamo callback reports a torch.compile compile; the guard failure that
  caused a recompile comes separately, from TORCH_LOGS output (a DynamoRecompile), and is paired
  with it here whichever arrives first (see `_DynamoReasons`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from neurondesk.core import events as ev
from neurondesk.core.reduce.processes import ProcessReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import StepReducer

# A guard-failure line is printed just before its recompile starts; the compile is reported when
# it ends. They come through different channels (the workload's output, read late; the probe's
# socket), so a reason pairs with a recompile whose [start, end] it falls in, give or take this.
REASON_SLACK_S = 30.0
PENDING_KEEP = 64  # unpaired reasons / recompiles kept waiting for their other half
# dynamo compiles a guard failure never causes (the probe's point ends with the callback trigger):
# a lazily compiled backward, autotuning, CUDA graph recording. They do not wait for a reason.
NOT_GUARDED = (":LAZY_BACKWARD", ":TRITON_AUTOTUNING", ":CUDAGRAPH_RECORDING")


@dataclass
class CompileRecord:
    index: int  # 1-based, in arrival order
    t: float
    step: int | None
    source: str
    cause: str
    duration_s: float | None
    location: str | None
    graph_hash: str | None
    cache: str | None
    trigger: str | None
    input_shapes: list[list[int]] | None
    previous_shapes: list[list[int]] | None
    reason: str | None
    frames: list[str]
    ok: bool
    error: str | None
    name: str | None = None

    @property
    def status(self) -> str:
        """ok / failed / cached failure (a failure the persistent cache kept from an earlier run)."""
        if self.cache == "failed":
            return "cached failure"
        return "ok" if self.ok else "failed"

    def as_dict(self) -> dict:
        return {
            "step": self.step,
            "cause": self.cause,
            "location": self.location,
            "graph_hash": self.graph_hash,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 6),
            "cache": self.cache,
            "source": self.source,
            "trigger": self.trigger,
            "input_shapes": self.input_shapes,
            "previous_shapes": self.previous_shapes,
            "reason": self.reason,
            "frames": self.frames,
            "ok": self.ok,
            "status": self.status,
            "error": self.error,
            "name": self.name,
        }


def _is_shape_reason(reason: str) -> bool:
    return "size mismatch" in reason or "shape" in reason or "stride mismatch" in reason


class _DynamoReasons:
    """Pairs dynamo recompiles (probe) with their guard-failure reasons (TORCH_LOGS output).

    Either half may arrive first, by any delay up to REASON_SLACK_S beyond the compile's span.
    Pairs form oldest first (the n-th reason of a process goes to its n-th recompile), within one
    process when both halves know their pid.
    """

    def __init__(self) -> None:
        self.reasons: deque[ev.DynamoRecompile] = deque(maxlen=PENDING_KEEP)
        self.recompiles: deque[tuple[CompileRecord, float, int | None]] = deque(maxlen=PENDING_KEEP)

    @staticmethod
    def _fits(r: ev.DynamoRecompile, record: CompileRecord, start: float, pid: int | None) -> bool:
        if r.pid is not None and pid is not None and r.pid != pid:
            return False
        return start - REASON_SLACK_S <= r.t <= record.t + REASON_SLACK_S

    def recompile(self, record: CompileRecord, start: float, pid: int | None) -> None:
        for i, r in enumerate(self.reasons):
            if self._fits(r, record, start, pid):
                del self.reasons[i]
                apply_reason(record, r)
                return
        self.recompiles.append((record, start, pid))

    def reason(self, r: ev.DynamoRecompile) -> None:
        for i, (record, start, pid) in enumerate(self.recompiles):
            if self._fits(r, record, start, pid):
                del self.recompiles[i]
                apply_reason(record, r)
                return
        self.reasons.append(r)


def apply_reason(record: CompileRecord, r: ev.DynamoRecompile) -> None:
    record.reason = r.reason
    record.location = record.location or r.location
    if _is_shape_reason(r.reason):
        record.cause = "shape-change"


class CompileReducer:
    def __init__(self, run: RunReducer, procs: ProcessReducer, steps: StepReducer) -> None:
        self._run = run
        self._procs = procs
        self._steps = steps
        self.compiles: list[CompileRecord] = []
        self.compile_open: dict[tuple, float] = {}  # (source, pid) -> start t
        self.points: dict[str, list] = {}  # sync point -> input shapes seen there
        self.pending_neuron: list[ev.CompileFinished] = []
        self.dynamo = _DynamoReasons()
        self.graph_breaks: list[ev.GraphBreak] = []
        self.first_ok: CompileRecord | None = None  # "first compile" is the first that succeeded

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"compile_started": self.on_compile_started, "compile": self.on_compile,
                "dynamo_recompile": self.on_dynamo_recompile, "graph_break": self.on_graph_break}

    # ------------------------------------------------------------------ reduce
    def on_compile_started(self, e: ev.CompileStarted) -> None:
        self.compile_open[(e.source, e.pid)] = e.t

    def on_compile(self, e: ev.CompileFinished) -> None:
        started = self.compile_open.pop((e.source, e.pid), None)
        if e.source == "probe":
            self.compile_open.pop(("pt-xla-debug", e.pid), None)
        elif e.source == "neuron-log":  # an export tool's block around wrapper compiles starts without a pid
            self.compile_open.pop((e.source, None), None)
        if e.source == "neuron-log" and e.name is None and self._procs.processes:
            # A probe is watching: it reports this compile; the Neuron log only adds the
            # persistent-cache verdict and module hash to the probe's record.
            self._attach_neuron(e)
            return
        if e.source == "pt-xla-debug" and self._procs.processes:
            return  # the probe reports the same compile with its duration
        duration = e.duration_s
        if duration is None and started is not None and e.cache != "hit":
            duration = max(0.0, e.t - started)
        step = e.step if e.step is not None else self._steps.steps_done
        cause, previous = self._classify(e)
        record = CompileRecord(
            index=len(self.compiles) + 1, t=e.t, step=step, source=e.source, cause=cause,
            duration_s=duration, location=e.location, graph_hash=e.graph_hash, cache=e.cache,
            trigger=e.trigger, input_shapes=e.input_shapes, previous_shapes=previous,
            reason=e.reason, frames=list(e.frames), ok=e.ok, error=e.error, name=e.name)
        if (e.source == "dynamo" and cause != "first" and record.reason is None
                and not (e.point or "").endswith(NOT_GUARDED)):
            start = started if started is not None else e.t - (duration or 0.0)
            self.dynamo.recompile(record, start, e.pid)
        if self.pending_neuron and e.source == "probe":
            neuron = self.pending_neuron.pop(0)
            record.cache = neuron.cache or record.cache
            record.graph_hash = record.graph_hash or neuron.graph_hash
        self.compiles.append(record)
        if self.first_ok is None and record.ok:
            self.first_ok = record
        lead = self._procs.lead_pid
        if e.pid is None or e.pid == lead or lead is None:
            self._steps.mark_compiled(step)

    def _classify(self, e: ev.CompileFinished) -> tuple[str, list | None]:
        """first / shape-change / new-graph / value-access, from the sync point and shapes."""
        if e.trigger == "value-access":
            return "value-access", None
        key = e.point or e.location or e.graph_hash or e.name
        if key is None:
            return ("first" if self.first_ok is None else "new-graph"), None
        seen = self.points.get(key)
        if not e.ok:  # a failed attempt leaves the graph's slot to the one that succeeds
            return ("first" if seen is None else "new-graph"), None
        shapes = e.input_shapes
        if seen is None:
            self.points[key] = [shapes] if shapes is not None else []
            return "first", None
        if shapes is not None and seen and shapes not in seen:
            previous = seen[-1]
            seen.append(shapes)
            return "shape-change", previous
        if shapes is not None and not seen:
            seen.append(shapes)
        return "new-graph", None

    def on_dynamo_recompile(self, e: ev.DynamoRecompile) -> None:
        self.dynamo.reason(e)

    def _attach_neuron(self, e: ev.CompileFinished) -> None:
        for record in reversed(self.compiles):
            if record.source == "probe" and abs(record.t - e.t) < 5 and record.cache in (None, "miss"):
                if e.cache:
                    record.cache = e.cache
                record.graph_hash = record.graph_hash or e.graph_hash
                return
        self.pending_neuron.append(e)

    def on_graph_break(self, e: ev.GraphBreak) -> None:
        if e.step is None:  # from the log: the step in progress
            e = dataclasses.replace(e, step=self._steps.steps_done)
        self.graph_breaks.append(e)

    # ------------------------------------------------------------------ derived
    @property
    def compile_total_s(self) -> float:
        return sum(c.duration_s or 0.0 for c in self.compiles)

    @property
    def first_compile_s(self) -> float | None:
        return self.first_ok.duration_s if self.first_ok is not None else None

    @property
    def recompiles_after_warmup(self) -> int:
        warmup = self._run.warmup_steps
        return sum(1 for c in self.compiles if c.step is not None and c.step >= warmup)

    def open_compile_since(self) -> float | None:
        return min(self.compile_open.values()) if self.compile_open and not self._run.finished else None
