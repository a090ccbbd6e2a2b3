"""The append-only event journal (events.jsonl): one JSON object per line, one line per event.

Writing goes through a byte buffer and raw ``os.write`` on an O_APPEND descriptor, so that after a
failed write (disk full) exactly the bytes not yet on disk stay in memory and a later flush
continues where the last one stopped: no event is lost and none is written twice. Reading is
tolerant: a torn last line (killed mid-write), a malformed line, an unknown kind or a field of
the wrong type is reported with its line number and skipped. Lines are encoded and decoded by
``core/codec.py`` (every kind is known there, whatever else was imported).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Self

from neurondesk.core.codec import decode_event_line, encode_event
from neurondesk.core.events import Event

__all__ = ["JournalError", "JournalProblem", "JournalWriter", "encode_event", "iter_journal", "iter_journal_stream",
           "read_journal"]

FLUSH_INTERVAL_S = 1.0


class JournalError(OSError):
    """The journal could not be opened or written. The message names the path and what to do."""


@dataclass(frozen=True)
class JournalProblem:
    line: int  # 1-based
    error: str
    raw: str  # the line, cut to 200 characters


class JournalWriter:
    """Appends events to ``path``; flushes when a write finds the last flush over 1 s old, on
    ``flush()`` (the owner also calls it on a timer) and on ``close()``, which fsyncs.

    Thread-safe. An event passed to ``write`` is kept even when that call raises JournalError.
    """

    def __init__(
        self,
        path: Path | str,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._interval = flush_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._closed = False
        self._diverted = False
        try:
            # Private to its owner, and never through a symlink planted in the run folder (ELOOP).
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            if _ends_without_newline(self.path):
                self._buf += b"\n"  # a torn last line from an earlier run must not swallow ours
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise JournalError(f"refusing the event journal {self.path}: it is a symbolic link; "
                                   "remove it or choose another run folder") from e
            raise JournalError(
                f"cannot open the event journal {self.path}: {e.strerror or e}; "
                "check the directory exists and is writable, or set NEURONDESK_HOME"
            ) from e
        self._last_flush = clock()

    @property
    def diverted(self) -> bool:
        return self._diverted

    def divert(self, path: Path) -> int:
        """From now on append to ``path`` (a fallback file on another disk), starting with what
        could not be written here. Returns the journal's length left in the original file."""
        with self._lock:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            except OSError as e:
                raise JournalError(f"cannot open the fallback journal {path}: {e.strerror or e}") from e
            kept = os.fstat(self._fd).st_size
            os.close(self._fd)
            self._fd, self.path, self._diverted = fd, Path(path), True
            self._flush_locked()
            return kept

    @property
    def pending_bytes(self) -> int:
        """Bytes accepted but not yet written to the file."""
        return len(self._buf)

    def fileno(self) -> int:
        return self._fd

    def write(self, event: Event) -> None:
        line = encode_event(event)
        with self._lock:
            if self._closed:
                raise JournalError(f"the event journal {self.path} is closed; the event was not recorded")
            self._buf += line
            if self._clock() - self._last_flush >= self._interval:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self) -> None:
        """Flush, fsync and close. On JournalError nothing is closed and close() can be retried."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            try:
                os.fsync(self._fd)
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):  # not a file that can be synced
                    raise self._error(e) from e
            os.close(self._fd)
            self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_locked(self) -> None:
        self._last_flush = self._clock()  # also after a failure: retry on the next tick, not every write
        while self._buf:
            try:
                n = os.write(self._fd, self._buf)
            except OSError as e:
                raise self._error(e) from e
            del self._buf[:n]

    def _error(self, e: OSError) -> JournalError:
        return JournalError(
            f"cannot write the event journal {self.path}: {e.strerror or e}; the {len(self._buf):,} bytes "
            "of events not written are kept in memory and written when there is room again (free disk "
            "space now); if there is none by the end of the run, they go to a fallback folder named then"
        )


def _ends_without_newline(path: Path) -> bool:
    try:
        if not stat.S_ISREG(path.stat().st_mode) or path.stat().st_size == 0:
            return False
        with path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


def iter_journal(path: Path | str, problems: list[JournalProblem]) -> Iterator[Event]:
    """The journal's readable events one by one, in order, without holding the whole file (a long
    run replays in constant memory); each skipped line adds a JournalProblem to ``problems``."""
    path = Path(path)
    try:
        f = path.open("rb")
    except OSError as e:
        raise JournalError(f"cannot read the event journal {path}: {e.strerror or e}") from e
    with f:
        yield from iter_journal_stream(f, problems)


def iter_journal_stream(f: BinaryIO, problems: list[JournalProblem]) -> Iterator[Event]:
    """As iter_journal, from an open binary stream (a fallback's whole journal, for one)."""
    for no, raw in enumerate(f, start=1):
        try:
            event = decode_event_line(raw)
        except ValueError as e:  # EventDecodeError: not JSON, unknown kind, wrong field types
            if not raw.strip():
                continue
            torn = not raw.endswith(b"\n")  # only the last line can lack its newline
            error = f"torn last line ({e})" if torn else str(e)
            problems.append(JournalProblem(no, error, raw.decode("utf-8", "replace").rstrip("\n")[:200]))
            continue
        yield event


def read_journal(path: Path | str) -> tuple[list[Event], list[JournalProblem]]:
    """All readable events in order, and one JournalProblem per line that was skipped."""
    problems: list[JournalProblem] = []
    events = list(iter_journal(path, problems))
    return events, problems
