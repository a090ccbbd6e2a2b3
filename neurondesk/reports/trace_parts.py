"""The pieces of a trace export (reports/trace_export.py): the step range, what was written, the
lanes that keep complete events nested, the buckets of steps past the step budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MAX_LANES = 8
CLAMP_S = 0.001  # a span starting this little before the previous one on its lane ended starts at its end


@dataclass(frozen=True)
class ExportRange:
    from_step: int | None = None
    to_step: int | None = None

    def holds(self, step: int) -> bool:
        return (self.from_step is None or step >= self.from_step) and (self.to_step is None or step <= self.to_step)


@dataclass
class ExportStats:
    events: int = 0
    steps: int = 0
    bucket: int = 1  # steps per drawn step span
    path: str = ""

    def words(self) -> str:
        drawn = "one span per step" if self.bucket == 1 else f"one span per {self.bucket} steps"
        return f"{self.events:,} trace events ({self.steps:,} steps, {drawn}) written to {self.path or 'stdout'}"


@dataclass
class Lanes:
    ends: dict[int, float] = field(default_factory=dict)  # tid -> end of its latest span

    def pick(self, first_tid: int, start: float, end: float) -> tuple[int, float]:
        """A tid on which [start, end] does not overlap the previous span partially; the start is
        clamped to the last lane's end when every lane is taken."""
        for tid in range(first_tid, first_tid + MAX_LANES):
            last = self.ends.get(tid, -math.inf)
            if last - start <= CLAMP_S and end >= last:  # a hair's overlap (clock rounding) is clamped
                self.ends[tid] = end
                return tid, max(start, last)
        tid = first_tid + MAX_LANES - 1
        start = max(start, self.ends[tid])
        self.ends[tid] = max(end, start)
        return tid, start


@dataclass
class StepBucket:
    first: int
    start: float
    end: float = 0.0
    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    wait_s: float = 0.0
    samples: int = 0


def finite(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite(v) for v in x]
    return x
