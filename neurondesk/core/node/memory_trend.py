"""Memory that creeps: a trend test over one memory series (a rank's host RSS, a NeuronCore's device
memory, a process's GPU memory), never a threshold. Pure.

A series creeps when, over a window of at least MIN_SAMPLES samples and MIN_SPAN_S seconds:

1. it rises with time beyond chance: the Mann-Kendall statistic (pairs that rise minus pairs that
   fall) is at least Z_MIN standard deviations above zero (noise around a level: |z| ~ 1);
2. the robust slope (Theil-Sen: the median of the slopes between every pair of samples, which an
   outlier or a spike barely moves) grew the series by at least MIN_GROWTH_BYTES over the window, and
   by at least ABOVE_NOISE times the noise around that line (1.4826 times the median absolute
   residual: a standard deviation that a spike does not inflate);
3. it rises consistently: the median of each quarter of the window is above the median of the
   quarter before by at least CONSISTENT of what the slope predicts. A one-off allocation (a step
   up, then flat) raises one boundary at most, a warm-up that levels off (a plateau) fails the last
   one: neither is a leak.

The test tries the whole window, then its later three quarters, then its later half: the longest
one that passes says since when the series creeps (a leak that began mid-run is still found).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_SAMPLES = 20
MIN_SPAN_S = 20.0
Z_MIN = 4.0  # one-sided p ~ 3e-5: tested again every sample of a long run, it must rarely fire by chance
ABOVE_NOISE = 3.0
MIN_GROWTH_BYTES = 16 << 20  # a creep smaller than this over the window is not named
CONSISTENT = 0.4  # each quarter's rise, at least this share of what the slope predicts
QUARTERS = 4
STARTS = (0.0, 0.25, 0.5)  # the windows tried: from the first sample, a quarter in, half way


@dataclass(frozen=True)
class Creep:
    """A series that creeps: its robust slope and the window it holds over."""

    slope_per_s: float  # bytes per second (Theil-Sen)
    start: int  # index of the window's first sample in the series
    samples: int
    span_s: float
    z: float  # Mann-Kendall, in standard deviations
    first: float  # the fitted value at the window's start and end
    last: float


def theil_sen(ts: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept): the median of the pairwise slopes, and the median of y - slope * t."""
    slopes = sorted((ys[j] - ys[i]) / (ts[j] - ts[i]) for i in range(len(ts)) for j in range(i + 1, len(ts))
                    if ts[j] > ts[i])
    if not slopes:
        return 0.0, _median(ys)
    slope = _median(slopes)
    return slope, _median([y - slope * t for t, y in zip(ts, ys, strict=True)])


def mann_kendall_z(ys: list[float]) -> float:
    """The Mann-Kendall trend statistic in standard deviations (ties counted, continuity corrected)."""
    n = len(ys)
    if n < 3:
        return 0.0
    s = 0
    for i in range(n - 1):
        yi = ys[i]
        for yj in ys[i + 1:]:
            s += (yj > yi) - (yj < yi)
    counts: dict[float, int] = {}
    for y in ys:
        counts[y] = counts.get(y, 0) + 1
    var = (n * (n - 1) * (2 * n + 5) - sum(c * (c - 1) * (2 * c + 5) for c in counts.values() if c > 1)) / 18
    if var <= 0:
        return 0.0
    return (s - math.copysign(1, s)) / math.sqrt(var) if s else 0.0


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def _consistent(ts: list[float], ys: list[float], slope: float) -> bool:
    """Every quarter's median above the one before by at least CONSISTENT of the slope's rise."""
    n = len(ys)
    bounds = [round(k * n / QUARTERS) for k in range(QUARTERS + 1)]
    parts = [(_median(ts[a:b]), _median(ys[a:b])) for a, b in zip(bounds, bounds[1:], strict=False)]
    return all(y1 - y0 >= CONSISTENT * slope * (t1 - t0) and y1 > y0
               for (t0, y0), (t1, y1) in zip(parts, parts[1:], strict=False))


def window_creeps(ts: list[float], ys: list[float]) -> Creep | None:
    """The test on one window (every sample of ``ts`` / ``ys``, in time order)."""
    n = len(ts)
    if n < MIN_SAMPLES or ts[-1] - ts[0] < MIN_SPAN_S:
        return None
    z = mann_kendall_z(ys)
    if z < Z_MIN:
        return None
    slope, intercept = theil_sen(ts, ys)
    span = ts[-1] - ts[0]
    if slope <= 0 or slope * span < MIN_GROWTH_BYTES or not _consistent(ts, ys, slope):
        return None
    noise = 1.4826 * _median([abs(y - intercept - slope * t) for t, y in zip(ts, ys, strict=True)])
    if slope * span < ABOVE_NOISE * noise:
        return None
    return Creep(slope_per_s=slope, start=0, samples=n, span_s=span, z=z, first=intercept + slope * ts[0],
                 last=intercept + slope * ts[-1])


def creep(ts: list[float], ys: list[float]) -> Creep | None:
    """The longest window ending at the last sample (STARTS) over which the series creeps, or None."""
    n = len(ts)
    for frac in STARTS:
        start = int(frac * n)
        found = window_creeps(ts[start:], ys[start:])
        if found is not None:
            return Creep(**{**found.__dict__, "start": start})
    return None
