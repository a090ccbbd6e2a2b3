"""DiskReducer: the disks a run depends on, reduced from DiskSample and OutputNotStored events (and the
compiles, whose writes are bursts left out of the forecast). The figures, the words and the warnings are
core/node/disk.py's; this is the part that keeps state."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from neurondesk.core.events.device_events import DiskSample, FsReading
from neurondesk.core.events.neff_events import NeffCacheLog, NeffCompiles
from neurondesk.core.events.run_events import CompileFinished, CompileStarted, OutputNotStored
from neurondesk.core.node.disk import (
    COMPILES_KEPT,
    SAMPLES_KEPT,
    FsFigures,
    clock_words,
    full_in_s,
    growth_rate,
    size_words,
)


class _Fs:
    # defaults for a reducer state checkpointed before these were kept
    last_own: int | None = None
    own_bytes = 0
    unattributed = 0

    def __init__(self) -> None:
        self.reading: FsReading | None = None
        self.t = 0.0
        # the steady samples: (time, free bytes) with the bursts before each taken out of both
        self.samples: deque[tuple[float, int]] = deque(maxlen=SAMPLES_KEPT)
        self.last: tuple[float, int] | None = None  # the latest sample as read
        self.last_own: int | None = None  # the run's folders' bytes at it (None: not measured)
        self.burst_s = 0.0  # time spent in bursts so far
        self.burst_bytes = 0  # space used in them, by anyone
        self.own_bytes = 0  # of it, the run's own folders' growth
        self.unattributed = 0  # of it, where the folders were not measured

    def add(self, t: float, free: int, burst: bool, own: int | None = None) -> None:
        """A sample; ``burst``: a compile ran since the one before; ``own``: the run's folders' bytes."""
        if self.last is not None and burst:
            t0, f0 = self.last
            self.burst_s += t - t0
            self.burst_bytes += f0 - free
            if own is not None and self.last_own is not None:
                self.own_bytes += max(0, own - self.last_own)
            else:
                self.unattributed += f0 - free
        else:
            self.samples.append((t - self.burst_s, free + self.burst_bytes))
        self.last, self.last_own = (t, free), own

    def span_s(self) -> float:
        return self.samples[-1][0] - self.samples[0][0] if self.samples else 0.0


class DiskReducer:
    """Filesystems by device (or path), each with its latest reading and its recent free space;
    the relay's latest totals per stream."""

    def __init__(self) -> None:
        self._fs: dict[str, _Fs] = {}
        self.output: dict[str, OutputNotStored] = {}  # stream -> the relay's latest totals
        self.errors: list[str] = []  # the latest sample's unreadable paths
        self.events = 0  # events taken in (a view re-renders when it changes)
        self._open: dict[tuple[str, int | None], float] = {}  # compiles in progress: (source, pid) -> start
        self._compiles: deque[tuple[float, float]] = deque(maxlen=COMPILES_KEPT)  # finished: (start, end)
        self._neff_log_t: float | None = None  # TorchNeuron's log's previous read

    def handlers(self) -> dict[str, Callable]:
        return {"disk_sample": self.on_disk_sample, "output_not_stored": self.on_output_not_stored,
                "compile_started": self.on_compile_started, "compile": self.on_compile,
                "neff_compiles": self.on_neff_compiles, "neff_log": self.on_neff_log}

    def on_compile_started(self, e: CompileStarted) -> None:
        self._open[(e.source, e.pid)] = e.t

    def on_compile(self, e: CompileFinished) -> None:
        start = self._open.pop((e.source, e.pid), None)
        if e.duration_s is not None:
            start = e.t - e.duration_s if start is None else min(start, e.t - e.duration_s)
        self._compiles.append((e.t if start is None else start, e.t))

    def on_neff_compiles(self, e: NeffCompiles) -> None:
        """A step's eager NEFF compiles (TorchNeuron), reported at the step's end: their seconds before it."""
        if e.count > 0:
            self._compiles.append((e.t - (e.duration_s or 0.0), e.t))

    def on_neff_log(self, e: NeffCacheLog) -> None:
        """NEFFs stored in the persistent NEFF cache since the log's previous read: written in between."""
        since, self._neff_log_t = getattr(self, "_neff_log_t", None), e.t  # getattr: a checkpoint from before it
        if e.stores > 0 or e.misses > 0:
            self._compiles.append((e.t if since is None else since, e.t))

    def _compiled_between(self, t0: float | None, t: float) -> bool:
        """A compile ran in (t0, t]: one finished that overlaps it, or one still open."""
        if any(since < t for since in self._open.values()):
            return True
        return t0 is not None and any(start < t and end > t0 for start, end in self._compiles)

    def on_disk_sample(self, e: DiskSample) -> None:
        self.events += 1
        self.errors = list(e.errors)
        for r in e.filesystems:
            key = f"dev:{r.device}" if r.device else f"path:{r.path}"
            fs = self._fs.setdefault(key, _Fs())
            if fs.last is not None and e.t < fs.last[0]:
                continue  # out of order: the growth line needs time going forward
            fs.reading, fs.t = r, e.t
            fs.add(e.t, r.free_bytes, self._compiled_between(fs.last[0] if fs.last else None, e.t),
                   getattr(r, "own_bytes", None))  # getattr: a reading from before the field

    def on_output_not_stored(self, e: OutputNotStored) -> None:
        self.events += 1
        self.output[e.stream] = e

    def filesystems(self) -> list[FsFigures]:
        out = []
        for fs in self._fs.values():
            r = fs.reading
            if r is None:
                continue
            rate = growth_rate(fs.samples)
            ours = min(fs.own_bytes, max(0, fs.burst_bytes - fs.unattributed))  # never more than was used
            out.append(FsFigures(holds=list(r.holds), path=r.path, free_bytes=r.free_bytes,
                                 total_bytes=r.total_bytes,
                                 free_share=r.free_bytes / r.total_bytes if r.total_bytes > 0 else None,
                                 growth_bytes_per_s=rate, full_in_s=full_in_s(r.free_bytes, rate), t=fs.t,
                                 burst_bytes=ours,
                                 other_burst_bytes=max(0, fs.burst_bytes - fs.unattributed - ours),
                                 unattributed_burst_bytes=max(0, fs.unattributed), samples=len(fs.samples),
                                 span_s=fs.span_s()))
        return out

    # ------------------------------------------------------------------ output not stored
    @property
    def output_lost_bytes(self) -> int:
        """Bytes of the workload's output not stored: dropped, plus what was still held at the end."""
        return sum(e.lost_bytes + (e.pending_bytes if e.final else 0) for e in self.output.values())

    def output_not_stored_words(self) -> str | None:
        """"4.2 MB of the workload's output were not stored: disk full (ENOSPC) at 03:12:05 (stdout
        4.2 MB; writes succeed again)"; None while no write of the relay ever failed."""
        troubled = [e for e in self.output.values() if e.first_t is not None]
        if not troubled:
            return None
        first = min(troubled, key=lambda e: e.first_t or 0.0)
        why = f"{first.reason or 'a write failed'} at {clock_words(first.first_t or first.t)}"
        recovered = all(e.storing for e in troubled)
        lost = self.output_lost_bytes
        if lost == 0:
            if recovered:
                return f"the workload's output could not be stored for a while ({why}); nothing was lost"
            held = sum(e.pending_bytes for e in troubled)
            return (f"the workload's output cannot be stored ({why}): {size_words(held)} held in memory, "
                    "retried every second; the training goes on")
        streams = ", ".join(f"{e.stream} {size_words(e.lost_bytes + (e.pending_bytes if e.final else 0))}"
                            for e in sorted(self.output.values(), key=lambda e: e.stream)
                            if e.lost_bytes or (e.final and e.pending_bytes))
        return (f"{size_words(lost)} of the workload's output were not stored: {why} ({streams}; "
                f"{'writes succeed again' if recovered else 'writes still fail'})")

    def as_dict(self) -> dict:
        """summary.json's "disk"."""
        streams = {e.stream: {"lost_bytes": e.lost_bytes, "pending_bytes": e.pending_bytes, "reason": e.reason,
                              "first_failed_t": e.first_t, "storing": e.storing}
                   for e in sorted(self.output.values(), key=lambda e: e.stream)}
        return {"filesystems": [f.as_dict() for f in self.filesystems()],
                "output_not_stored": {"bytes": self.output_lost_bytes, "streams": streams,
                                      "words": self.output_not_stored_words()} if self.output else None,
                "errors": list(self.errors)}

    def status_words(self) -> list[str]:
        """Short parts for a status line: a near forecast or low space, output not stored."""
        parts = [w for w in (f.short() for f in self.filesystems()) if w]
        lost = self.output_lost_bytes
        if lost:
            parts.append(f"output not stored: {size_words(lost)}")
        elif any(not e.storing for e in self.output.values()):
            parts.append("output not stored yet: the disk refuses writes")
        return parts
