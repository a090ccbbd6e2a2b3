"""The disks a run depends on: free space, growth, when they fill, and output that could not be
stored. Pure: events in, figures and words out; every time comes from an event or an argument.

Events (DiskSample in core/events/device_events.py, OutputNotStored in core/events/run_events.py)
  DiskSample        free and total bytes of the filesystems holding the run folder and the Neuron
                    compile cache (collectors/devices/disk.py, statvfs every few seconds)
  OutputNotStored   the output relay's totals for one stream: bytes of the workload's output it
                    could not store in stdout.log / stderr.log, and why (collectors/output_relay.py)

Figures (core/reduce/disk.py's DiskReducer -> FsFigures): free share, growth rate (least squares over the last WINDOW_S
of samples), the time until full at that rate, and a warning when free space is under
WARN_FREE_SHARE or the forecast under WARN_FULL_IN_S.

The forecast is from the steady writes (the journal, the run's outputs, checkpoints at their cadence):
the space used between two samples while a compile ran (CompileStarted / CompileFinished: Inductor's
or Neuron's cache written in the first seconds of a run; TorchNeuron's eager NEFFs, NeffCompiles and
the NEFF cache log's stores, written to its persistent NEFF cache) is a burst, said apart (``burst_bytes``) and
left out of the growth line with its time, which goes on from where the burst began. Of a burst, only the growth
of the run's own folders on that disk (FsReading.own_bytes: the run folder, the compile caches) is charged to
the compiles; the rest is other writes on the disk (a shared disk), and where the folders were not measured,
said as not known. DiskWarnings turns the figures into
notices once per episode (the recorder journals them, so a replay shows the same notices).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from neurondesk.core.events.device_events import DiskSample, FsReading
from neurondesk.core.events.run_events import OutputNotStored

__all__ = ["DiskSample", "DiskWarnings", "FsFigures", "FsReading", "OutputNotStored"]

WINDOW_S = 600.0  # the growth rate is measured over the latest samples of this span
# and needs this many samples this far apart: a line through 10 s of a shared disk is noise (issue 50 item 7)
MIN_SPAN_S = 60.0
MIN_SAMPLES = 10
SAMPLES_KEPT = 256  # per filesystem: bounded, whatever the run's length (10 min at 5 s is 120)
WARN_FREE_SHARE = 0.10
WARN_FULL_IN_S = 6 * 3600.0
CLEAR_FREE_SHARE = 0.12  # a warning ends (and may come again) past these: no notice per sample near a limit
CLEAR_FULL_IN_S = 8 * 3600.0
SHOW_FULL_IN_S = 24 * 3600.0  # the status line names a forecast under this
COMPILES_KEPT = 64  # the latest compiles' spans, for the samples still to come that overlap them


# ---------------------------------------------------------------- words


def size_words(n: float) -> str:
    """Decimal units, as disks are sold and `df -H` prints: 4.2 MB, 1.3 GB."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"  # not reached


def duration_words(seconds: float) -> str:
    """2 h 10 min, 35 min, 3 days 4 h, under a minute."""
    s = max(0.0, seconds)
    if s < 60:
        return "under a minute"
    minutes = int(s // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} days {hours} h" if hours else f"{days} days"


def rate_words(bytes_per_s: float) -> str:
    per_min = bytes_per_s * 60
    return f"{size_words(per_min)}/min" if abs(per_min) < 1e9 else f"{size_words(bytes_per_s)}/s"


def clock_words(t: float) -> str:
    """A given Unix time as the local wall clock, HH:MM:SS."""
    return datetime.fromtimestamp(t).strftime("%H:%M:%S")


# ---------------------------------------------------------------- the forecast


def growth_rate(samples: Iterable[tuple[float, int]], window_s: float = WINDOW_S,
                min_span_s: float = MIN_SPAN_S, min_samples: int = MIN_SAMPLES) -> float | None:
    """Bytes per second by which the used space grows (free space shrinks): the least-squares
    slope of free bytes over time, over the samples within ``window_s`` of the latest one; None
    with too few samples or too short a span. Negative: space is being freed."""
    pts = list(samples)
    if not pts:
        return None
    latest = pts[-1][0]
    first = len(pts)
    while first > 0 and latest - pts[first - 1][0] <= window_s:  # samples arrive in time order
        first -= 1
    pts = pts[first:]
    n = len(pts)
    if n < min_samples or latest - pts[0][0] < min_span_s:
        return None
    t0, f0 = pts[0]
    st = sf = stt = stf = 0.0
    for t, f in pts:  # one pass, times and sizes taken from the first sample (no loss of precision)
        x, y = t - t0, float(f - f0)
        st += x
        sf += y
        stt += x * x
        stf += x * y
    var = stt - st * st / n
    if var <= 0:
        return None
    return -(stf - st * sf / n) / var


def full_in_s(free_bytes: int, rate: float | None) -> float | None:
    """Seconds until no space is left at ``rate`` (bytes/s used); None when it is not filling."""
    if rate is None or rate <= 0:
        return None
    return max(0.0, free_bytes) / rate


# ---------------------------------------------------------------- the reducer


@dataclass(frozen=True)
class FsFigures:
    holds: list[str]
    path: str
    free_bytes: int
    total_bytes: int
    free_share: float | None
    growth_bytes_per_s: float | None
    full_in_s: float | None
    t: float  # the latest sample
    burst_bytes: int = 0  # the run's own folders' growth while compiles ran (their caches): left out of the forecast
    other_burst_bytes: int = 0  # other writes on the disk meanwhile (a shared disk): left out too
    unattributed_burst_bytes: int = 0  # used meanwhile where the run's folders were not measured
    samples: int = 0  # steady samples in the forecast's window
    span_s: float = 0.0  # and the time they cover

    @property
    def holds_words(self) -> str:
        return " and the ".join(self.holds)

    def warning(self) -> str | None:
        """One line when free space is under WARN_FREE_SHARE or the disk fills within WARN_FULL_IN_S."""
        low = self.free_share is not None and self.free_share < WARN_FREE_SHARE
        soon = self.full_in_s is not None and self.full_in_s < WARN_FULL_IN_S
        if not (low or soon):
            return None
        share = f" ({self.free_share:.0%})" if self.free_share is not None else ""
        text = (f"the disk holding the {self.holds_words} ({self.path}) has {size_words(self.free_bytes)} "
                f"free{share}")
        if self.full_in_s is not None:
            text += (f": disk full in about {duration_words(self.full_in_s)} at this rate "
                     f"(+{rate_words(self.growth_bytes_per_s or 0)})")
        return text + self.burst_words()

    def words(self) -> str:
        """The console's line: free space, growth, forecast."""
        share = f" ({self.free_share:.0%})" if self.free_share is not None else ""
        text = f"disk {self.holds_words}: {size_words(self.free_bytes)} free of {size_words(self.total_bytes)}{share}"
        rate = self.growth_bytes_per_s
        if rate is None:
            text += (f", not enough data yet for a forecast ({self.samples} samples over {self.span_s:.0f} s; "
                     f"it needs {MIN_SAMPLES} over {duration_words(MIN_SPAN_S)})")
        elif self.full_in_s is None:
            text += ", not filling" if rate <= 0 else ""
        else:
            text += f", +{rate_words(rate)}, full in about {duration_words(self.full_in_s)} at this rate"
        return text + self.burst_words()

    def burst_words(self) -> str:
        """"; 1.2 GB written during the compiles (their caches), 861.0 MB other writes on the disk meanwhile,
        left out of the forecast"."""
        parts = []
        if self.burst_bytes > 0:
            parts.append(f"{size_words(self.burst_bytes)} written during the compiles (their caches)")
        if self.other_burst_bytes > 0:
            parts.append(f"{size_words(self.other_burst_bytes)} other writes on the disk meanwhile")
        if self.unattributed_burst_bytes > 0:
            parts.append(f"{size_words(self.unattributed_burst_bytes)} written on the disk while compiles ran "
                         "(the run's folders not measured: whose is not known)")
        return f"; {', '.join(parts)}, left out of the forecast" if parts else ""

    def short(self) -> str | None:
        """For a status line: the forecast when it is near, else a low free share; None otherwise."""
        if self.full_in_s is not None and (self.full_in_s < SHOW_FULL_IN_S or self.warning()):
            return f"disk full in about {duration_words(self.full_in_s)} ({self.holds[0]})"
        if self.warning():
            return f"disk {size_words(self.free_bytes)} free ({self.holds[0]})"
        return None

    def as_dict(self) -> dict:
        return {"holds": list(self.holds), "path": self.path, "free_bytes": self.free_bytes,
                "total_bytes": self.total_bytes,
                "free_share": None if self.free_share is None else round(self.free_share, 4),
                "growth_bytes_per_s": None if self.growth_bytes_per_s is None else round(self.growth_bytes_per_s, 1),
                "full_in_s": None if self.full_in_s is None else round(self.full_in_s, 1),
                "full_in": None if self.full_in_s is None else duration_words(self.full_in_s),
                "compile_burst_bytes": self.burst_bytes, "other_burst_bytes": self.other_burst_bytes,
                "unattributed_burst_bytes": self.unattributed_burst_bytes,
                "warning": self.warning(), "words": self.words()}


# ---------------------------------------------------------------- notices, once per episode


class DiskWarnings:
    """Which filesystems are in a warning now, and for what (low free space, full soon); ``check``
    returns the warnings that are new: one when a filesystem enters a warning, one more when the
    other condition joins it (a low disk that then gets a forecast). A warning ends past
    CLEAR_FREE_SHARE and CLEAR_FULL_IN_S (or when the disk stops filling), and may then come again."""

    def __init__(self) -> None:
        self.active: dict[str, set[str]] = {}

    def check(self, figures: list[FsFigures]) -> list[str]:
        new = []
        for f in figures:
            key = f.path
            text = f.warning()
            if text is not None:
                why = _conditions(f)
                said = self.active.setdefault(key, set())
                if not why <= said:
                    said |= why
                    new.append(text)
            elif key in self.active and _cleared(f):
                del self.active[key]
        return new


def _conditions(f: FsFigures) -> set[str]:
    out = set()
    if f.free_share is not None and f.free_share < WARN_FREE_SHARE:
        out.add("low")
    if f.full_in_s is not None and f.full_in_s < WARN_FULL_IN_S:
        out.add("soon")
    return out


def _cleared(f: FsFigures) -> bool:
    roomy = f.free_share is None or f.free_share >= CLEAR_FREE_SHARE
    later = f.full_in_s is None or f.full_in_s >= CLEAR_FULL_IN_S
    return roomy and later


def output_notice(before: OutputNotStored | None, now: OutputNotStored, path: str) -> tuple[str, str] | None:
    """(level, message) when a stream's writes start failing or succeed again; None otherwise."""
    failing_before = before is not None and not before.storing
    if not now.storing and not failing_before:
        return ("error", f"the workload's {now.stream} cannot be stored in {path}: {now.reason or 'a write failed'} "
                f"at {clock_words(now.first_t or now.t)}; the training goes on, neurondesk holds up to 8 MiB, "
                "retries every second and counts what it cannot store")
    if now.storing and failing_before:
        lost = f"; {size_words(now.lost_bytes)} of it were not stored" if now.lost_bytes else "; nothing was lost"
        return ("info", f"the workload's {now.stream} is stored in {path} again at {clock_words(now.t)}{lost}")
    return None
