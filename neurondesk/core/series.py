"""Derived series for the charts: the step time as a rolling median (and p90) over the steps that
compiled nothing, with the compile steps apart, so a chart draws a line a person reads at a
glance instead of a scatter of dots spanning milliseconds to minutes. Pure: no clock, no I/O."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neurondesk.core.reduce.steps import StepRecord


def rolling_quantiles(values: Sequence[float], window: int, q: float) -> list[float]:
    """Element i: the q-quantile of values[max(0, i - window + 1) .. i] (a trailing window, so a
    live chart's line does not move once drawn). The median (q = 0.5) of an even count is the mean
    of the middle two; other quantiles are the nearest rank (ceil(q x n)-th smallest)."""
    if window < 1:
        raise ValueError(f"window {window}: give at least 1")
    if not 0 <= q <= 1:
        raise ValueError(f"q {q}: give a fraction 0..1")
    out: list[float] = []
    ordered: list[float] = []
    for i, v in enumerate(values):
        insort(ordered, v)
        if i >= window:
            del ordered[bisect_left(ordered, values[i - window])]
        n = len(ordered)
        if q == 0.5:
            mid = n // 2
            out.append(ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2)
        else:
            out.append(ordered[max(0, math.ceil(q * n) - 1)])
    return out


def rolling_median(values: Sequence[float], window: int) -> list[float]:
    return rolling_quantiles(values, window, 0.5)


@dataclass(frozen=True)
class StepTimeLine:
    steps: list[int]  # of the steps that compiled nothing
    median_s: list[float]  # rolling median of their step time
    p90_s: list[float]  # rolling p90
    window: int
    compile_steps: list[int]  # the steps that compiled, marked apart
    compile_s: list[float]  # their own step time


def auto_window(n: int) -> int:
    """About 1/40 of the steps, at least 9 and at most 101: wide enough to smooth one slow step
    out, narrow enough to show a slowdown that lasts."""
    return max(9, min(101, n // 40))


def step_time_line(history: Iterable[StepRecord], window: int | None = None,
                   points: int | None = None) -> StepTimeLine:
    """The steps' rolling median and p90 over the steps that compiled nothing; the compile steps
    apart. ``points``: at most this many points on the line (every k-th, the last kept), for a
    chart that many cells wide; the window is over every step either way."""
    records = list(history)
    plain = [r for r in records if not r.compiled]
    w = window or auto_window(len(plain))
    times = [r.duration_s for r in plain]
    steps = [r.step for r in plain]
    med, p90 = rolling_median(times, w), rolling_quantiles(times, w, 0.9)
    if points is not None and points > 0 and len(steps) > points:
        k = -(-len(steps) // points)
        keep = list(range(len(steps) - 1, -1, -k))[::-1]
        steps, med, p90 = [steps[i] for i in keep], [med[i] for i in keep], [p90[i] for i in keep]
    compiled = [r for r in records if r.compiled]
    return StepTimeLine(steps, med, p90, w, [r.step for r in compiled], [r.duration_s for r in compiled])
