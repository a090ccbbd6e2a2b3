"""Loss values the workload printed, and when (steps and wall time) it reached the target; the
throughput figure the workload printed itself, beside neurondesk's steady one.

One truth where a framework keeps its own record (the probe reads transformers' Trainer.log and
Lightning's logger path: events whose ``source`` is not ``stdout``): the record wins over the
printed text of the same value, and nothing is counted twice. The first recorded loss replaces the
printed ones so far (they were its copies, rounded or quoted) and printed losses after it are not
counted; a recorded end-of-training rate replaces the printed copy of that figure."""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import HISTORY, StepReducer, mean_step_s, samples_per_s, steady_rate


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
        self.loss_source: str | None = None  # PRINTED, or the framework whose records the figures are
        self.script_rate = ScriptRateReducer(steps)

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"loss": self.on_loss, "throughput": self.script_rate.on_rate, "eval_phase": self.script_rate.on_eval}

    def script_throughput(self) -> ScriptRate | None:
        return self.script_rate.result()

    def on_loss(self, e: ev.LossReported) -> None:
        recorded = e.source != PRINTED
        if not recorded and self.loss_source not in (None, PRINTED):
            return  # the framework's record of this loss is counted, not its printed copy
        if recorded and self.loss_source in (None, PRINTED):
            self._forget_printed()
        self.loss_source = e.source
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

    def _forget_printed(self) -> None:
        self.loss_first = self.loss_last = None
        self.loss_history.clear()
        self.steps_to_target = self.time_to_target_s = None
        self.loss_nonfinite = 0


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
    def figure(self) -> str:
        """What the script's figure is: a run average is compared with neurondesk's own run average."""
        return "run average" if self.compared_with.startswith("all-in") else "printed while steady"

    @property
    def off(self) -> bool:
        return self.vs_steady is not None and abs(self.vs_steady) > SCRIPT_RATE_TOLERANCE

    def as_dict(self) -> dict:
        return {"value": self.value, "unit": self.unit, "line": self.line, "printed": self.printed,
                "steady_value": None if self.steady_value is None else round(self.steady_value, 6),
                "compared_with": self.compared_with, "figure": self.figure,
                "vs_steady": None if self.vs_steady is None else round(self.vs_steady, 4),
                "tolerance": SCRIPT_RATE_TOLERANCE, "off": self.off}

    def warning(self) -> str | None:
        if not self.off or self.vs_steady is None or self.steady_value is None:
            return None
        return (f"the script's own throughput ({self.figure}: {self.value:,.4g} {self.unit}, from '{self.line[:80]}') "
                "differs "
                f"from neurondesk's {self.compared_with} ({self.steady_value:,.4g} {self.unit}) by "
                f"{self.vs_steady * 100:+.0f}% (more than {SCRIPT_RATE_TOLERANCE:.0%}): one of them counts what "
                "the other does not (compile, warm-up or evaluation time in the script's average, another "
                "batch size, one process or all)")


# An output line reaches the recorder up to a poll or two after it was printed, a probe message up
# to its batching delay: a rate line this close to an evaluation phase belongs to it.
EVAL_SLACK_S = 0.5
FINAL_MARKS = ("train_samples_per_second", "train_steps_per_second")  # a framework's end-of-training figures
PRINTED = "stdout"  # the source of a figure read from the workload's output (logparse); any other: a record


@dataclass
class _UnitRates:
    """The figures printed in one unit: (t, value, line) of each, the steady ones apart."""

    printed: list[tuple[float, float, str]]
    steady: deque  # (t, value) of the figures printed once steady state had begun
    final: bool = False  # a framework's own end-of-training figure was among them
    recorded: bool = False  # ... as its own record (the probe's), not its printed line


class ScriptRateReducer:
    """The throughput figures the workload printed (``ThroughputReported``), per unit (a script's
    steps/s bar and its samples/s summary are two figures, not one that changed), kept apart by
    whether neurondesk's steady state had begun when the line came. A figure printed during an
    evaluation phase (Trainer's and Lightning's evaluation, test and predict bars carry no word
    that says so) is not the training rate: it is dropped once the phase is known (its
    ``eval_phase`` event comes at its end), and a framework's own end-of-training figure
    (``train_samples_per_second``) is preferred to any bar."""

    def __init__(self, steps: StepReducer) -> None:
        self._steps = steps
        self.units: dict[str, _UnitRates] = {}
        self.latest_unit: str | None = None
        self.eval_windows: deque[tuple[float, float]] = deque(maxlen=HISTORY)
        self.eval_ends: deque[float] = deque(maxlen=HISTORY)
        self.dropped_in_eval = 0

    def on_rate(self, e: ev.ThroughputReported) -> None:
        final = any(mark in e.line for mark in FINAL_MARKS)  # says it is training's, wherever it is printed
        if not math.isfinite(e.value) or (not final and self._in_eval(e.t)):
            self.dropped_in_eval += 1
            return
        recorded = e.source != PRINTED
        if final and not recorded and any(r.recorded for r in self.units.values()):
            return  # the framework's record of its end-of-training figure is counted, not the printed copy
        if recorded:
            self._forget_printed_finals()
        rates = self.units.get(e.unit)
        if rates is None:
            rates = self.units[e.unit] = _UnitRates([], deque(maxlen=HISTORY))
        rates.printed.append((e.t, e.value, e.line))
        del rates.printed[:-HISTORY]
        rates.final = rates.final or final
        rates.recorded = rates.recorded or recorded
        self.latest_unit = e.unit
        if self._steps.steady_from is not None:
            rates.steady.append((e.t, e.value))

    def _forget_printed_finals(self) -> None:
        """A framework's recorded end-of-training figure came: its printed copies (in either unit:
        the printed dict holds samples/s and steps/s) are dropped."""
        for rates in self.units.values():
            if rates.final and not rates.recorded:
                rates.printed = [r for r in rates.printed if not any(m in r[2] for m in FINAL_MARKS)]
                rates.final = False

    def on_eval(self, e: ev.EvalPhase) -> None:
        window = (e.t - e.duration_s - EVAL_SLACK_S, e.t + EVAL_SLACK_S)
        self.eval_ends.append(e.t)
        self.eval_windows.append(window)
        for rates in self.units.values():
            kept = [r for r in rates.printed
                    if not window[0] <= r[0] <= window[1] or any(m in r[2] for m in FINAL_MARKS)]
            self.dropped_in_eval += len(rates.printed) - len(kept)
            rates.printed = kept
            rates.steady = deque((r for r in rates.steady if not window[0] <= r[0] <= window[1]), maxlen=HISTORY)

    def _in_eval(self, t: float) -> bool:
        return any(lo <= t <= hi for lo, hi in self.eval_windows)

    def _chosen_unit(self) -> str | None:
        live = {u: r for u, r in self.units.items() if r.printed}
        if not live:
            return None
        finals = [u for u, r in live.items() if r.final]
        if finals:
            return finals[0]
        return max(live, key=lambda u: (len(live[u].printed), u == self.latest_unit))

    def result(self) -> ScriptRate | None:
        unit = self._chosen_unit()
        if unit is None:
            return None
        rates = self.units[unit]
        t, last, line = rates.printed[-1]
        if rates.final:  # the framework's own figure over its whole training: a run average, set
            value = last  # against neurondesk's all-in rate over the same span, never the steady one
            ours, label = _all_in(self._steps, unit, self._eval_after_last_step(t))
        else:
            value = statistics.median(v for _t, v in rates.steady) if rates.steady else last
            ours, label = self._steady_in(unit, value)
        vs = value / ours - 1 if ours else None
        return ScriptRate(value, unit, line, len(rates.printed), ours, label, vs)

    def _eval_after_last_step(self, until: float) -> float:
        """The end of the first evaluation after the last step, if it ended before ``until``: Trainer's
        evaluation at its last step is inside train() and its figures; a final evaluate() after it is
        not (its line reaches the recorder later than it was printed, so time alone cannot tell)."""
        last = self._steps.last_step_end
        after = [x for x in self.eval_ends if last is not None and last <= x <= until]
        return min(after, default=0.0)

    def _steady_in(self, unit: str, value: float) -> tuple[float | None, str]:
        steps = self._steps
        if unit == "samples/s":
            return _nearest(value, _samples_per_s(steps))
        step_s = mean_step_s(steps)
        if step_s is None or step_s <= 0:
            return None, "steady step time"
        if unit == "steps/s":
            return 1.0 / step_s, "steady steps/s (1 / mean step time)"
        return step_s * _PER_S[unit], "steady mean step time"

ALL_IN = "all-in {} over training (first step to last, compiles and evaluations in it: a run average too)"


def _all_in(steps: StepReducer, unit: str, eval_end: float) -> tuple[float | None, str]:
    """neurondesk's run average over the span a framework's end-of-training figure covers (Trainer's
    train_runtime): from the first step's start to the last step's end, or to the end of the
    evaluation right after it (Trainer's evaluation at the last step)."""
    start, end, done = steps.first_step_start, steps.last_step_end, steps.steps_done
    label = ALL_IN.format("steps/s" if unit == "steps/s" else "samples/s" if unit == "samples/s" else "step time")
    if start is None or end is None or not done or max(end, eval_end) <= start:
        return None, label
    span = max(end, eval_end) - start
    if unit == "steps/s":
        return done / span, label
    if unit != "samples/s":
        return span / done * _PER_S[unit], label
    known = [r.samples for r in steps.history if r.samples is not None]
    if not known:
        return None, label
    return statistics.fmean(known) * done * steps.world / span, label


def _samples_per_s(steps: StepReducer) -> list[tuple[float, str]]:
    """neurondesk's steady samples/s: all processes, and the lead's own when there are several."""
    job = samples_per_s(steps)
    if job is None:
        return []
    out = [(job, "steady samples/s")]
    lead = steady_rate(steps.steady_samples, len(steps.steady_times), mean_step_s(steps))  # the same basis
    if lead is not None:
        if not math.isclose(lead, job):
            out = [(job, "steady samples/s (all processes)"), (lead, "steady samples/s (one process)")]
    return out


def _nearest(value: float, candidates: list[tuple[float, str]]) -> tuple[float | None, str]:
    """The candidate closest to ``value`` (a script prints one process's rate or all processes')."""
    if not candidates:
        return None, "steady samples/s (not known: no batch size; --samples-per-step sets it)"
    return min(candidates, key=lambda c: abs(value / c[0] - 1) if c[0] else math.inf)
