"""Derived series for the charts: the step time as a rolling median (and p90) over the steps that
compiled nothing, with the compile steps apart, so a chart draws a line a person reads at a
glance instead of a scatter of dots spanning milliseconds to minutes. Pure: no clock, no I/O."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neurondesk.core.node.sketch import Bucket
from neurondesk.core.reduce.steps import HISTORY, StepRecord, StepReducer


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


def whole_run_line(steps: StepReducer, points: int | None = None) -> StepTimeLine:
    """The whole run from its downsampled series (core/node/sketch.py), for a run longer than the
    history: per bucket of steps its median (the line) and its max (the band's edge), and the
    steps that compiled (their bucket's max), so a compile wall at the start and a slowdown in
    the middle of a long run both show. ``window``: the steps per bucket."""
    return _buckets_line(steps.series.points(), steps.series_compiled.points(), steps.series.width, points)


def _buckets_line(pts: Sequence[Bucket], comp: Sequence[Bucket], width: int, points: int | None) -> StepTimeLine:
    pts = list(pts)
    if points is not None and points > 0 and len(pts) > points:
        k = -(-len(pts) // points)
        pts = [_merge(pts[i:i + k]) for i in range(0, len(pts), k)]
    return StepTimeLine([p.last_step for p in pts], [p.median_s for p in pts], [p.max_s for p in pts],
                        width, [p.last_step for p in comp], [p.max_s for p in comp])


def _merge(bs):
    return Bucket(bs[0].first_step, bs[-1].last_step, sum(b.n for b in bs), min(b.min_s for b in bs),
                  sorted(b.median_s for b in bs)[len(bs) // 2], max(b.max_s for b in bs))


@dataclass(frozen=True)
class ChartData:
    """What the step-time chart is drawn from at one moment (a copy: the reducer goes on): the recent
    history while the run fits in it, else the whole run's buckets. ``chart_line_of`` draws its line
    for a chart of any width."""

    whole: bool
    history: tuple[StepRecord, ...] = ()
    buckets: tuple[Bucket, ...] = ()
    compiled: tuple[Bucket, ...] = ()
    bucket_steps: int = 1


def chart_data(steps: StepReducer) -> ChartData:
    if steps.steps_done > HISTORY:
        return ChartData(True, buckets=tuple(steps.series.points()), compiled=tuple(steps.series_compiled.points()),
                         bucket_steps=steps.series.width)
    return ChartData(False, history=tuple(steps.history))


def chart_line_of(data: ChartData, points: int | None = None) -> StepTimeLine:
    if data.whole:
        return _buckets_line(data.buckets, data.compiled, data.bucket_steps, points)
    return step_time_line(data.history, points=points)


def chart_line(steps: StepReducer, points: int | None = None) -> tuple[StepTimeLine, bool]:
    """(line, whole): the rolling line over the recent history while the run fits in it, the whole
    run's downsampled line once it does not."""
    data = chart_data(steps)
    return chart_line_of(data, points), data.whole


def binned(xs: Sequence[int], ys: Sequence[float | None], bins: int) -> tuple[list[int], list[float]]:
    """At most `bins` points for a chart `bins` dots wide: the mean of each run of steps, placed
    at its last step (a chart cannot show more points than it has dots)."""
    size = max(1, -(-len(xs) // max(1, bins)))
    out_x: list[int] = []
    out_y: list[float] = []
    for i in range(0, len(xs), size):
        chunk = [y for y in ys[i:i + size] if y is not None]
        if chunk:
            out_x.append(xs[min(i + size, len(xs)) - 1])
            out_y.append(sum(chunk) / len(chunk))
    return out_x, out_y


def loss_line(history: Sequence[tuple[int, float]], bins: int) -> tuple[list[int], list[float]]:
    """The loss against step for a chart ``bins`` dots wide (nan and inf left out)."""
    return binned([s for s, _ in history], [v if math.isfinite(v) else None for _, v in history], bins)
