"""Steps and throughput: the lead process's steps, the steady ones and their quantiles, data wait,
graph executions per step and where a step is split, and the step count corrected for step
messages the probe had to drop.

Steady state (the README quotes this): a step is *steady* when its index is at least
`warmup_steps` (default 5) and nothing compiled during it — no compile the probe counted in the
step, and no compile event (probe, dynamo or Neuron log) attributed to it. Steady figures are
taken over the steady steps of the lead process (the first process that reported a step).

One basis for every steady figure (docs/steady-state.md): the steady step time is the MEAN steady step
(the steady steps' time over their count), and every rate is a per-step amount over it
(``steady_rate``): samples/s = the mean samples a steady step / the mean steady step time, which is the
steady samples over the steady time, as the script's own timer counts it; steps/hour and the cost of 1k
steps read the same mean, so a few slow steps cost what they cost. samples/s x step time is always the
samples of a step. The median and the p90 are the steps' spread beside it (robust figures for stragglers).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from itertools import repeat
from operator import add, sub

from neurondesk.core.events import run_events as ev
from neurondesk.core.node.sketch import Downsampled, QuantileSketch
from neurondesk.core.reduce.processes import ProcessReducer
from neurondesk.core.reduce.run import RunReducer

HISTORY = 2000  # steps kept for charts; aggregates cover every step
# A batch of at least this many steps is reduced column by column; shorter ones (2-3 steps a send
# at 50 steps/s) step by step, which is cheaper for them (benchmarks/long_run.py's finding)
COLUMNS_FROM = 8
INPUT_WARN, INPUT_BOUND = 0.05, 0.20  # data-wait fraction thresholds


def steady_rate(amount: float, steps: int, step_time_s: float | None) -> float | None:
    """The one steady rate: ``amount`` over ``steps`` steady steps is ``amount / steps`` a step, at
    one step every ``step_time_s`` (the mean steady step); None when a part is unknown."""
    if steps <= 0 or step_time_s is None or step_time_s <= 0:
        return None
    return amount / steps / step_time_s


@dataclass(slots=True)
class StepRecord:
    step: int
    t: float
    duration_s: float
    samples: int | None
    tokens: int | None
    data_wait_s: float
    executions: int | None
    compiled: bool
    steady: bool


@dataclass
class SplitPoint:
    trigger: str
    location: str | None
    count: int = 0
    library: str | None = None  # the framework's frame where the graph ran, inside the user's line
    called_from: str | None = None  # its caller in the library (GraphExecuted.called_from)


def quantile_sorted(xs, q: float) -> float | None:
    """Linear-interpolated quantile of an already sorted sequence (None when empty)."""
    if not xs:
        return None
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def quantile(values, q: float) -> float | None:
    """Linear-interpolated quantile of a sequence (None when empty)."""
    return quantile_sorted(sorted(values), q)


class StepReducer:
    def __init__(self, run: RunReducer, procs: ProcessReducer) -> None:
        self._run = run
        self._procs = procs
        self.steps_done = 0  # the lead's steps: max(its highest step index + 1, the probe's own count)
        self.history: deque[StepRecord] = deque(maxlen=HISTORY)
        self.total_step_s = self.total_wait_s = 0.0
        self.steady_from: int | None = None
        # every steady step's time, in bounded memory: quantiles exact up to 4,096 steps, within
        # 0.5% after (core/node/sketch.py)
        self.steady_times = QuantileSketch()
        self.steady_total_s = 0.0
        # the step time of the whole run for charts, min/median/max per bucket of steps (bounded)
        self.series = Downsampled()  # steps that compiled nothing
        self.series_compiled = Downsampled()  # steps in which something compiled
        self.steady_samples = self.steady_tokens = 0
        self.total_samples = 0  # of every step of the lead (the history keeps the last HISTORY only)
        self.total_tokens = 0
        self.steady_samples_known = self.steady_tokens_known = True
        self.steady_wait_s = 0.0
        self.steady_execs, self.all_execs = Counter(), Counter()
        self.steps_with_compile: set[int] = set()  # marked by the CompileReducer
        self.split_points: dict[tuple, SplitPoint] = {}
        self._lead_next = 0  # the lead's highest step index + 1
        # the probe's drop reports, per process: (messages dropped, step messages dropped, steps ended)
        self.probe_drops: dict[int, tuple[int, int, int]] = {}
        # for the time breakdown and the shape advisor (the lead's steps)
        self.first_step_start: float | None = None  # wall time the first step began
        self.first_step_end: float | None = None  # ... and ended (time to first step: core/figures/run_figures.py)
        self.last_shape: tuple[int, ...] | None = None  # the latest step's batch shape
        self.last_step_end: float | None = None
        self.compiled_step_s = 0.0  # time of the steps in which something compiled
        self.shape_counts: Counter = Counter()  # the first input shape of each step, as a tuple
        # last_step_steady as it was right after the first step of the last StepBatch (the telemetry
        # reads it: its per-step work happens at a batch's first step)
        self.first_of_batch_steady = False

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"step": self.on_step, "steps": self.on_steps, "graph_executed": self.on_graph_executed,
                "probe_dropped": self.on_probe_dropped}

    # ------------------------------------------------------------------ reduce
    def mark_compiled(self, step: int) -> None:
        self.steps_with_compile.add(step)

    def on_step(self, e: ev.StepEnded) -> None:
        if e.pid != self._procs.lead_pid:
            return
        self._one(e.step, e.t, e.duration_s, e.data_wait_s, e.executions, e.samples, e.tokens,
                  e.compiles > 0, e.eval_s, e.input_shapes[0] if e.input_shapes else None)
        drops = self.probe_drops.get(e.pid)
        self.steps_done = self._lead_next if drops is None else max(self._lead_next, drops[2])

    def on_steps(self, b: ev.StepBatch) -> None:
        """A coalesced batch: the same as its steps one by one (tests/unit/test_step_batches.py)."""
        self.first_of_batch_steady = self.last_step_steady
        if b.pid != self._procs.lead_pid or not len(b):
            return
        n, first = len(b), b.step
        marked = self.steps_with_compile
        if n >= COLUMNS_FROM and first >= self._run.warmup_steps and not (
                marked and any(s in marked for s in range(first, first + n))):
            self._steady_batch(b)
        else:  # a short batch, one that reaches into the warm-up or holds a step marked compiled: one by one
            none = [None] * n
            shape = b.input_shapes[0] if b.input_shapes else None
            one = self._one
            for i, t, d, w, x, sa, to in zip(range(n), b.ts, b.duration_s, b.data_wait_s, b.executions or none,
                                              b.samples or none, b.tokens or none, strict=True):
                one(first + i, t, d, w, x, sa, to, False, 0.0, shape)
                if i == 0:
                    self.first_of_batch_steady = self.history[-1].steady  # what the telemetry saw after it
        drops = self.probe_drops.get(b.pid)
        self.steps_done = self._lead_next if drops is None else max(self._lead_next, drops[2])

    def _steady_batch(self, b: ev.StepBatch) -> None:
        """A batch of steady steps (past the warm-up, none compiled): what ``_one`` does to each of
        them, column by column. Sums add in the same order, so every figure is the same to the bit."""
        run, n, first = self._run, len(b), b.step
        ds, waits, ts = b.duration_s, b.data_wait_s, b.ts
        samples = [run.samples_override] * n if run.samples_override is not None else b.samples
        tokens = [run.tokens_override] * n if run.tokens_override is not None else b.tokens
        self._lead_next = max(self._lead_next, first + n)
        self.total_step_s = reduce(add, ds, self.total_step_s)
        self.total_wait_s = reduce(add, waits, self.total_wait_s)
        start = min(map(sub, ts, ds))
        if self.first_step_start is None or start < self.first_step_start:
            self.first_step_start = start
        end = max(ts)
        if self.last_step_end is None or end > self.last_step_end:
            self.last_step_end = end
        if self.first_step_end is None:
            self.first_step_end = b.ts[0]
        if b.input_shapes:
            self.last_shape = tuple(b.input_shapes[0])
            self.shape_counts[self.last_shape] += n
        if b.executions is not None:
            self.all_execs.update(b.executions)
            self.steady_execs.update(b.executions)
        if self.steady_from is None:
            self.steady_from = first
        self.steady_times.add_many(ds)
        self.steady_total_s = reduce(add, ds, self.steady_total_s)
        self.steady_wait_s = reduce(add, waits, self.steady_wait_s)
        if samples is None:
            self.steady_samples_known = False
        else:
            self.steady_samples += sum(samples)
            self.total_samples += sum(samples)
        if tokens is None:
            self.steady_tokens_known = False
        else:
            self.steady_tokens += sum(tokens)
            self.total_tokens += sum(tokens)
        self.series.add_many(first, ds)
        k = max(0, n - HISTORY)  # the history keeps its last HISTORY records only
        none = [None] * n
        self.history.extend(map(StepRecord, range(first + k, first + n), ts[k:], ds[k:], (samples or none)[k:],
                                (tokens or none)[k:], waits[k:], (b.executions or none)[k:], repeat(False),
                                repeat(True)))
        self.first_of_batch_steady = True

    def _one(self, step: int, t: float, duration: float, wait: float, execs: int | None, samples: int | None,
             tokens: int | None, compiled_in_step: bool, eval_s: float, first_shape: list[int] | None) -> None:
        """One step of the lead process (a StepEnded, or one of a StepBatch)."""
        run = self._run
        if run.samples_override is not None:
            samples = run.samples_override
        if run.tokens_override is not None:
            tokens = run.tokens_override
        compiled = compiled_in_step or step in self.steps_with_compile
        steady = step >= run.warmup_steps and not compiled
        if step >= self._lead_next:
            self._lead_next = step + 1
        self.total_step_s += duration
        self.total_wait_s += wait
        self.total_samples += samples or 0
        self.total_tokens += tokens or 0
        start = t - duration - eval_s
        if self.first_step_start is None or start < self.first_step_start:
            self.first_step_start = start
        if self.last_step_end is None or t > self.last_step_end:
            self.last_step_end = t
        if self.first_step_end is None:
            self.first_step_end = t
        if compiled:
            self.compiled_step_s += duration
        if first_shape is not None:
            self.last_shape = tuple(first_shape)
            self.shape_counts[self.last_shape] += 1
        if execs is not None:
            self.all_execs[execs] += 1
        if steady:
            if self.steady_from is None:
                self.steady_from = step
            self.steady_times.append(duration)
            self.steady_total_s += duration
            self.steady_wait_s += wait
            if samples is None:
                self.steady_samples_known = False
            else:
                self.steady_samples += samples
            if tokens is None:
                self.steady_tokens_known = False
            else:
                self.steady_tokens += tokens
            if execs is not None:
                self.steady_execs[execs] += 1
        (self.series_compiled if compiled else self.series).add(step, duration)
        self.history.append(StepRecord(step, t, duration, samples, tokens, wait, execs, compiled, steady))

    def on_graph_executed(self, e: ev.GraphExecuted) -> None:
        key = (e.trigger, e.location, e.library)  # one user line, several places in the library
        point = self.split_points.get(key)
        if point is None:
            point = self.split_points[key] = SplitPoint(e.trigger, e.location, 0, e.library, e.called_from)
        point.count += 1

    def on_probe_dropped(self, e: ev.ProbeDropped) -> None:
        # running totals of that process: keep the largest seen, whatever order they arrive in
        old = self.probe_drops.get(e.pid, (0, 0, 0))
        now = (max(old[0], e.dropped), max(old[1], e.dropped_steps), max(old[2], e.steps))
        self.probe_drops[e.pid] = now
        if e.pid == self._procs.lead_pid:
            self.steps_done = max(self._lead_next, now[2])

    # ------------------------------------------------------------------ derived
    @property
    def steps_lost(self) -> int:
        """Step messages the probes dropped (the recorder fell behind), all processes."""
        return sum(d[1] for d in self.probe_drops.values())

    @property
    def messages_lost(self) -> int:
        return sum(d[0] for d in self.probe_drops.values())

    def steady_quantile(self, q: float, exact: bool = False) -> float | None:
        """Quantile of the steady step times: exact over the first 4,096 steady steps, within 0.5%
        of a step time at that rank after (a bounded log histogram, core/node/sketch.py). ``exact`` is
        kept for callers; every answer is the sketch's. Depends on the values only: a replay, or
        a reader that started from a checkpoint, gives the same numbers."""
        return self.steady_times.quantile(q)

    @property
    def world(self) -> int:
        return self._procs.world

    @property
    def data_wait_fraction(self) -> float | None:
        if self.steady_times:
            return self.steady_wait_s / self.steady_total_s if self.steady_total_s > 0 else None
        if self.total_step_s > 0:
            return self.total_wait_s / self.total_step_s
        return None

    def recent_data_wait_fraction(self, n: int = 20) -> float | None:
        recent = [r for r in list(self.history)[-n:] if not r.compiled]
        total = sum(r.duration_s for r in recent)
        return sum(r.data_wait_s for r in recent) / total if total > 0 else None

    @property
    def executions_per_step(self) -> int | None:
        counts = self.steady_execs or self.all_execs
        return counts.most_common(1)[0][0] if counts else None

    def input_verdict(self) -> str:
        frac = self.data_wait_fraction
        if frac is None:
            return "unknown"
        if frac >= INPUT_BOUND:
            return "input-bound"
        return "warn" if frac >= INPUT_WARN else "ok"

    @property
    def last_step_steady(self) -> bool:
        return bool(self.history) and self.history[-1].steady


# The one steady basis (module docstring), apart from the reducer: what the steps' totals mean.
def mean_step_s(steps: StepReducer) -> float | None:
    """The steady step time: the steady steps' time over their count."""
    n = len(steps.steady_times)
    return steps.steady_total_s / n if n and steps.steady_total_s > 0 else None


def samples_per_s(steps: StepReducer) -> float | None:
    """Every process's steady samples a step (the lead's times the world) over the mean steady step."""
    if not steps.steady_samples_known:
        return None
    return steady_rate(steps.steady_samples * steps.world, len(steps.steady_times), mean_step_s(steps))


def tokens_per_s(steps: StepReducer) -> float | None:
    if not steps.steady_tokens_known or not steps.steady_tokens:
        return None
    return steady_rate(steps.steady_tokens * steps.world, len(steps.steady_times), mean_step_s(steps))
