"""Loss values the workload printed, and when (steps and wall time) it reached the target; the
throughput figure the workload printed itself, beside neurondesk's steady one."""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from neurondesk.core import events as ev
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import HISTORY, StepReducer


class LossReducer:
    def __init__(self, run: RunReducer, steps: StepReducer) -> None:
        self._run = run
        self._steps = steps
        self.loss_first: float | None = None
        self.loss_last: float | None = None
        self.loss_history: deque[tuple[int, float]] = deque(maxlen=HISTORY)
        self.steps_to_target: int | None = None
        self.time_to_target_s: float | None = None  # wall seconds from the run's start to that loss line
        self.loss_nonfinite = 0  # nan / inf losses seen
        self.script_rate = ScriptRateReducer(steps)

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"loss": self.on_loss, "throughput": self.script_rate.on_rate}

    def script_throughput(self) -> ScriptRate | None:
        return self.script_rate.result()

    def on_loss(self, e: ev.LossReported) -> None:
        step = e.step if e.step is not None else self._steps.steps_done
        if self.loss_first is None:
            self.loss_first = e.value
        self.loss_last = e.value
        self.loss_history.append((step, e.value))
        finite = math.isfinite(e.value)
        if not finite:
            self.loss_nonfinite += 1
        target, started = self._run.target_loss, self._run.started_t
        if self.steps_to_target is None and target is not None and finite and e.value <= target:
            self.steps_to_target = step
            self.time_to_target_s = max(0.0, e.t - started) if started is not None else None


SCRIPT_RATE_TOLERANCE = 0.10  # the script's own figure and neurondesk's steady one may differ this much
_PER_S = {"steps/s": 1.0, "ms/step": 1000.0, "s/step": 1.0}


@dataclass(frozen=True)
class ScriptRate:
    """The workload's own throughput figure beside neurondesk's steady one, in the script's unit."""

    value: float  # median of the figures printed once steady state had begun (else the last one)
    unit: str  # steps/s, samples/s, ms/step or s/step
    line: str  # the last line a figure was read from
    printed: int  # figures read in this unit; the median is over the ones printed while steady
    steady_value: float | None  # neurondesk's steady figure in the same unit
    compared_with: str  # what steady_value is
    vs_steady: float | None  # value / steady_value - 1

    @property
    def off(self) -> bool:
        return self.vs_steady is not None and abs(self.vs_steady) > SCRIPT_RATE_TOLERANCE

    def as_dict(self) -> dict:
        return {"value": self.value, "unit": self.unit, "line": self.line, "printed": self.printed,
                "steady_value": None if self.steady_value is None else round(self.steady_value, 6),
                "compared_with": self.compared_with,
                "vs_steady": None if self.vs_steady is None else round(self.vs_steady, 4),
                "tolerance": SCRIPT_RATE_TOLERANCE, "off": self.off}

    def warning(self) -> str | None:
        if not self.off or self.vs_steady is None or self.steady_value is None:
            return None
        return (f"the script's own throughput ({self.value:,.4g} {self.unit}, from '{self.line[:80]}') differs "
                f"from neurondesk's {self.compared_with} ({self.steady_value:,.4g} {self.unit}) by "
                f"{self.vs_steady * 100:+.0f}% (more than {SCRIPT_RATE_TOLERANCE:.0%}): one of them counts what "
                "the other does not (compile, warm-up or evaluation time in the script's average, another "
                "batch size, one process or all)")


class ScriptRateReducer:
    """The throughput figures the workload printed (``ThroughputReported``), kept apart by whether
    neurondesk's steady state had begun when the line came."""

    def __init__(self, steps: StepReducer) -> None:
        self._steps = steps
        self.unit: str | None = None
        self.line = ""
        self.printed = 0
        self.last: float | None = None
        self.steady_values: deque[float] = deque(maxlen=HISTORY)

    def on_rate(self, e: ev.ThroughputReported) -> None:
        if e.unit != self.unit:  # a script that changes unit: the latest one is what it says now
            self.unit, self.printed = e.unit, 0
            self.steady_values.clear()
        self.printed += 1
        self.last, self.line = e.value, e.line
        if self._steps.steady_from is not None and math.isfinite(e.value):
            self.steady_values.append(e.value)

    def result(self) -> ScriptRate | None:
        if self.unit is None or self.last is None:
            return None
        value = statistics.median(self.steady_values) if self.steady_values else self.last
        ours, label = self._steady_in(self.unit, value)
        vs = value / ours - 1 if ours else None
        return ScriptRate(value, self.unit, self.line, self.printed, ours, label, vs)

    def _steady_in(self, unit: str, value: float) -> tuple[float | None, str]:
        steps = self._steps
        if unit == "samples/s":
            return _nearest(value, _samples_per_s(steps))
        step_s = steps.steady_quantile(0.5)
        if step_s is None or step_s <= 0:
            return None, "steady step time"
        if unit == "steps/s":
            return 1.0 / step_s, "steady steps/s (1 / median step time)"
        return step_s * _PER_S[unit], "steady median step time"


def _samples_per_s(steps: StepReducer) -> list[tuple[float, str]]:
    """neurondesk's steady samples/s: all processes, and the lead's own when there are several."""
    job = steps.steady_samples_per_s
    if job is None:
        return []
    out = [(job, "steady samples/s")]
    if steps.steady_total_s > 0:
        lead = steps.steady_samples / steps.steady_total_s
        if not math.isclose(lead, job):
            out = [(job, "steady samples/s (all processes)"), (lead, "steady samples/s (one process)")]
    return out


def _nearest(value: float, candidates: list[tuple[float, str]]) -> tuple[float | None, str]:
    """The candidate closest to ``value`` (a script prints one process's rate or all processes')."""
    if not candidates:
        return None, "steady samples/s (not known: no batch size; --samples-per-step sets it)"
    return min(candidates, key=lambda c: abs(value / c[0] - 1) if c[0] else math.inf)
