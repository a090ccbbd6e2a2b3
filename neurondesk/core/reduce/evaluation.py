"""Evaluation phases of a training script: forwards under no_grad / inference_mode / eval mode
between training steps. The probe leaves their time out of the steps they ran in and reports
each phase on its own (EvalPhase), so training throughput counts training alone and the
evaluation's share of the run (and of its cost) is a figure of its own."""

from __future__ import annotations

from collections.abc import Callable

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.processes import ProcessReducer


class EvalReducer:
    def __init__(self, procs: ProcessReducer) -> None:
        self._procs = procs
        self.phases = 0
        self.total_s = 0.0
        self.batches = 0
        self.samples = 0
        self.tokens = 0
        self.data_wait_s = 0.0
        self.compiles = 0
        self.last_step: int | None = None  # the training step the latest phase ran in
        self.spans: list[tuple[float, float]] = []  # (start, end) wall times of each phase
        # the latest progress seen outside training steps: a phase still open (its EvalProgress), or a
        # progress line the workload printed (its own bar: ThroughputReported); core/node/hang.py reads it
        self.progress_t: float | None = None

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"eval_phase": self.on_eval_phase, "eval_progress": self.on_progress, "throughput": self.on_progress}

    def on_progress(self, e: ev.EvalProgress | ev.ThroughputReported) -> None:
        self.progress_t = e.t if self.progress_t is None else max(self.progress_t, e.t)

    def on_eval_phase(self, e: ev.EvalPhase) -> None:
        lead = self._procs.lead_pid
        if lead is not None and e.pid != lead:
            return  # other ranks evaluate the same batches: one process's phases are the run's
        self.phases += 1
        self.total_s += max(0.0, e.duration_s)
        self.batches += e.batches
        self.samples += e.samples
        self.tokens += e.tokens
        self.data_wait_s += e.data_wait_s
        self.compiles += e.compiles
        self.last_step = e.step
        self.spans.append((e.t - max(0.0, e.duration_s), e.t))

    def seconds_within(self, start: float, end: float) -> float:
        """Evaluation time that fell between two wall times."""
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in self.spans)
