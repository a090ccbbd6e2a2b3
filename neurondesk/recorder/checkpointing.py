"""The recorder's side of checkpoints (store/checkpoint.py): when to write one. What a reader does
with them is in sources/rebuild.py; what is written, store/state_codec.py (a state it cannot encode
is a ValueError like a full disk's OSError: said once, the run goes on)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.core.reduce.state import RunState
from neurondesk.store.checkpoint import write_checkpoint
from neurondesk.store.journal import JournalWriter
from neurondesk.store.rundir import RunPaths

EVERY_EVENTS = 200_000  # a checkpoint at least this often ...
EVERY_S = 10.0  # ... or this often while events come
SEGMENT_KEEP = 32  # per-segment checkpoints kept (for replay --until); thinned to every 2nd, 4th ... past that


class Checkpointer:
    """``after_flush(state, journal)`` right after a flush that left nothing pending: writes a
    checkpoint when EVERY_EVENTS events or EVERY_S seconds passed since the last one, and the
    first one of each new segment under its segment's name too. Returns a line to journal as a
    notice when writing failed for a new reason (said once; the run goes on, readers use the
    last good checkpoint or the journal)."""

    def __init__(self, run_dir: Path, every_events: int = EVERY_EVENTS, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.run_dir = Path(run_dir)
        self.every_events, self.every_s, self.clock = every_events, every_s, clock
        self._last_events = 0
        self._last_t = clock()
        self._segment_done = -1  # segments whose first checkpoint is written
        self.written = 0
        self.bytes = 0
        self.problem: str | None = None

    def due(self, state: RunState, journal: JournalWriter) -> bool:
        new = state.event_count - self._last_events
        if new <= 0 or journal.pending_bytes or journal.diverted:
            return False
        return (new >= self.every_events or self.clock() - self._last_t >= self.every_s
                or journal.segment > self._segment_done)

    def after_flush(self, state: RunState, journal: JournalWriter, force: bool = False) -> str | None:
        if not (self.due(state, journal) or (force and state.event_count > self._last_events
                                             and not journal.pending_bytes and not journal.diverted)):
            return None
        self._last_events, self._last_t = state.event_count, self.clock()
        segment, _ = position = journal.position
        which = [None] + ([segment] if segment > self._segment_done else [])  # None: the latest
        try:
            for one in which:
                self.bytes = write_checkpoint(self.run_dir, state, journal.path, position, one)
                self.written += 1
            if segment > self._segment_done:
                thin_segment_checkpoints(self.run_dir, segment)
            self._segment_done = segment
        except (OSError, ValueError) as exc:
            words = (f"checkpoint not written in {self.run_dir}: {getattr(exc, 'strerror', None) or exc}; "
                     "readers start from the last good one, or reduce the whole journal")
            new = words != self.problem
            self.problem = words
            return words if new else None
        self.problem = None
        return None


def thin_segment_checkpoints(run_dir: Path, newest: int, keep: int = SEGMENT_KEEP) -> int:
    """Keep at most ``keep`` per-segment checkpoints: those of every 2^k-th segment (the smallest
    k that fits) and the newest. Returns how many were removed. A removal that fails is left."""
    found = RunPaths(run_dir).segment_checkpoints()
    stride = 1
    while sum(1 for n in found if n % stride == 0) > keep - 1:
        stride *= 2
    removed = 0
    for n, path in found.items():
        if n % stride and n != newest:
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
    return removed
