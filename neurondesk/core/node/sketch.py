"""Quantiles of a long stream in bounded memory, and a step-time series downsampled for any length.

``QuantileSketch``: every value goes into a logarithmic histogram (DDSketch's mapping: bucket i
holds (γ^(i-1), γ^i] with γ = (1+α)/(1-α), read back as 2γ^i/(γ+1)), so any quantile is within a
relative error α = 0.5% of a value of the stream at that rank, whatever the stream's length; the
first EXACT_KEEP values are kept as well, and while there are no more than that the quantile is
exact (linear interpolation between the two nearest ranks, as ``quantile_sorted``). Memory: one
integer per occupied bucket — about 460 buckets per factor of 10 between the fastest and the
slowest value (a step time from 1 µs to 1000 s: at most ~4,200), never one per value.

``Downsampled``: min / median / max per run of consecutive steps, at most MAX_BUCKETS of them.
Steps are taken ``width`` at a time into a bucket (its values held until it closes: its median is
exact); when there are MAX_BUCKETS closed buckets, neighbours merge pairwise and the width doubles
(a merged bucket's median is the mean of its halves' medians). A three-day run's chart still
shows the compile wall of its first minutes and a slowdown at hour 40. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from itertools import repeat
from operator import add, truediv

RELATIVE_ERROR = 0.005
EXACT_KEEP = 4096
MAX_BUCKETS = 512


def _quantile_sorted(xs, q: float) -> float | None:
    if not xs:
        return None
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class QuantileSketch:
    """Counts of positive values in log buckets (zero and below counted apart), the running sum,
    and the first EXACT_KEEP values exactly."""

    def __init__(self, alpha: float = RELATIVE_ERROR, exact_keep: int = EXACT_KEEP) -> None:
        self.alpha = alpha
        self.gamma = (1 + alpha) / (1 - alpha)
        self._log_gamma = math.log(self.gamma)
        self.exact_keep = exact_keep
        self.counts: dict[int, int] = {}
        self.zeros = 0  # values <= 0
        self.n = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None
        self.exact: array | None = array("d")  # None once more than exact_keep values came
        self._sorted: list[float] | None = None

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        if self.min is None or x < self.min:
            self.min = x
        if self.max is None or x > self.max:
            self.max = x
        if x > 0:
            i = math.ceil(math.log(x) / self._log_gamma)
            self.counts[i] = self.counts.get(i, 0) + 1
        else:
            self.zeros += 1
        if self.exact is not None:
            if len(self.exact) < self.exact_keep:
                self.exact.append(x)
                self._sorted = None
            else:
                self.exact = self._sorted = None  # from now on the histogram answers

    def append(self, x: float) -> None:  # the array("d") it replaces was appended to
        self.add(x)

    def add_many(self, xs: list[float]) -> None:
        """``add`` of each value in turn, in a few passes of C loops (a StepBatch's steps): the
        same sketch to the last bit (the running sum adds them in the same order)."""
        if not xs:
            return
        self.n += len(xs)
        self.total = reduce(add, xs, self.total)
        lo, hi = min(xs), max(xs)
        if self.min is None or lo < self.min:
            self.min = lo
        if self.max is None or hi > self.max:
            self.max = hi
        positive = xs if lo > 0 else [x for x in xs if x > 0]
        self.zeros += len(xs) - len(positive)
        counts = self.counts
        for i, c in Counter(map(math.ceil, map(truediv, map(math.log, positive), repeat(self._log_gamma)))).items():
            counts[i] = counts.get(i, 0) + c
        if self.exact is not None:
            if len(self.exact) + len(xs) <= self.exact_keep:
                self.exact.extend(xs)
                self._sorted = None
            else:
                self.exact = self._sorted = None

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return self.n > 0

    def __iter__(self):
        """The values themselves, while they are all kept (EXACT_KEEP); TypeError after."""
        if self.exact is None:
            raise TypeError(f"the sketch keeps counts only past {self.exact_keep:,} values")
        return iter(self.exact)

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    def value_of(self, i: int) -> float:
        """The value bucket ``i`` stands for (within alpha of everything in it)."""
        return 2 * self.gamma ** i / (self.gamma + 1)

    def _at_rank(self, k: int, buckets: list[tuple[int, int]]) -> float:
        """The k-th smallest value (0-based), as its bucket's value; clamped to the seen range."""
        if k < self.zeros:
            return min(0.0, self.min)  # type: ignore[type-var]
        seen = self.zeros
        for i, c in buckets:
            seen += c
            if k < seen:
                v = self.value_of(i)
                return min(max(v, self.min), self.max)  # type: ignore[type-var]
        return self.max  # type: ignore[return-value]

    def quantile(self, q: float) -> float | None:
        if self.n == 0:
            return None
        if self.exact is not None:
            if self._sorted is None:
                self._sorted = sorted(self.exact)
            return _quantile_sorted(self._sorted, q)
        buckets = sorted(self.counts.items())
        pos = (self.n - 1) * q
        lo = math.floor(pos)
        a = self._at_rank(lo, buckets)
        if pos == lo or lo + 1 >= self.n:
            return a
        b = self._at_rank(lo + 1, buckets)
        return a + (b - a) * (pos - lo)

    def count_at_most(self, bound: float) -> int:
        """Values at or below ``bound`` (exact while all are kept; else by bucket, to alpha)."""
        if self.exact is not None:
            return sum(1 for x in self.exact if x <= bound)
        if bound <= 0:
            return self.zeros if bound == 0 else 0
        top = math.ceil(math.log(bound) / self._log_gamma)
        return self.zeros + sum(c for i, c in self.counts.items() if i <= top)


@dataclass(slots=True)
class Bucket:
    first_step: int
    last_step: int
    n: int
    min_s: float
    median_s: float
    max_s: float


@dataclass
class Downsampled:
    """Step times of the whole run, MAX_BUCKETS buckets at most (see the module's docstring)."""

    max_buckets: int = MAX_BUCKETS
    width: int = 1
    buckets: list[Bucket] = field(default_factory=list)
    _open: list[float] = field(default_factory=list)
    _open_first: int = 0
    _open_last: int = 0

    def add(self, step: int, value: float) -> None:
        if not self._open:
            self._open_first = step
        self._open.append(value)
        self._open_last = step
        if len(self._open) >= self.width:
            self._close()

    def add_many(self, first_step: int, values: list[float]) -> None:
        """``add(first_step + i, values[i])`` for each value, a bucket's worth at a time."""
        i, n = 0, len(values)
        while i < n:
            if not self._open:
                self._open_first = first_step + i
            take = min(self.width - len(self._open), n - i)
            self._open.extend(values[i:i + take])
            i += take
            self._open_last = first_step + i - 1
            if len(self._open) >= self.width:
                self._close()

    def _close(self) -> None:
        xs = sorted(self._open)
        n = len(xs)
        med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
        self.buckets.append(Bucket(self._open_first, self._open_last, n, xs[0], med, xs[-1]))
        self._open = []
        if len(self.buckets) >= self.max_buckets:
            merged = []
            for a, b in zip(self.buckets[::2], self.buckets[1::2], strict=False):
                merged.append(Bucket(a.first_step, b.last_step, a.n + b.n, min(a.min_s, b.min_s),
                                     (a.median_s + b.median_s) / 2, max(a.max_s, b.max_s)))
            if len(self.buckets) % 2:
                merged.append(self.buckets[-1])
            self.buckets = merged
            self.width *= 2

    def points(self) -> list[Bucket]:
        """The closed buckets and the one filling now."""
        if not self._open:
            return list(self.buckets)
        xs = sorted(self._open)
        n = len(xs)
        med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
        return [*self.buckets, Bucket(self._open_first, self._open_last, n, xs[0], med, xs[-1])]
