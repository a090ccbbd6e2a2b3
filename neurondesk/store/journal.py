"""The append-only event journal (events.jsonl): one JSON object per line, one line per event.

Writing goes through a byte buffer and raw ``os.write`` on an O_APPEND descriptor, so that after a
failed write (disk full) exactly the bytes not yet on disk stay in memory and a later flush
continues where the last one stopped: no event is lost and none is written twice. Reading is
tolerant: a torn last line (killed mid-write), a malformed line, an unknown kind or a field of
the wrong type is reported with its line number and skipped. Lines are encoded and decoded by
``core/events/codec.py`` (every kind is known there, whatever else was imported).

Segments (store/journal_segments.py): past ``segment_bytes`` the writer closes the live file into a
numbered segment, compressed with zstd, and goes on in a new ``events.jsonl``; readers take the
segments in order, then the live file. ``position`` (segment, bytes in it) is where a checkpoint
of the state reduced so far points.
"""

from __future__ import annotations

import errno
import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Self

from neurondesk.core.events.codec import decode_event_line, encode_event
from neurondesk.core.events.run_events import Event
from neurondesk.store import journal_segments as seg
from neurondesk.store.input_files import bounded_lines, open_regular_stream
from neurondesk.store.own_files import FileId, NotOurFile, create_new, reopen_same

__all__ = ["JournalError", "JournalProblem", "JournalWriter", "encode_event", "iter_journal", "iter_journal_stream",
           "read_journal"]

FLUSH_INTERVAL_S = 1.0
SEGMENT_BYTES = 8 << 20  # the live file is closed into a compressed segment past this size
MAX_LINE = 16 << 20  # a journal line is an event: far under this; a longer one is skipped, never held


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
        segment_bytes: int | None = SEGMENT_BYTES,
        continues: FileId | None = None,
    ) -> None:
        """A new journal at ``path``, made by this open (a file or symlink already there is refused:
        JournalError); ``continues``: go on appending to the journal file that is there, which must
        be that very file (one the caller made, or opened and checked itself)."""
        self.path = Path(path)
        self._interval = flush_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._closed = False
        self._diverted = False
        self._segment_bytes = segment_bytes
        self._rotate_at = segment_bytes
        self.segment = 0  # the live file's segment number
        self.size = 0  # bytes of the live file on disk
        self.rotation_problem: str | None = None  # the last rotation or compression that failed, in words
        self.rotations = 0
        try:
            # Private to its owner, and never through a symlink or a file planted in the run folder
            self._fd, self.file_id = _open_journal(self.path, continues, "the event journal")
            self.size = os.fstat(self._fd).st_size
            if self.size:
                self.segment = seg.segment_of_file(self._fd) or 0
                if os.pread(self._fd, 1, self.size - 1) != b"\n":
                    self._buf += b"\n"  # a torn last line from an earlier run must not swallow ours
            else:
                closed = seg.closed_segments(self.path)
                if closed:  # a live file lost after rotations: go on numbering after them
                    self.segment = max(closed) + 1
                    self._buf += seg.meta_line(self.segment, time.time())
        except NotOurFile as e:
            raise JournalError(str(e)) from e
        except OSError as e:
            raise JournalError(
                f"cannot open the event journal {self.path}: {e.strerror or e}; "
                "check the directory exists and is writable, or set NEURONDESK_HOME"
            ) from e
        self._last_flush = clock()

    @property
    def diverted(self) -> bool:
        return self._diverted

    def divert(self, path: Path, continues: FileId | None = None) -> int:
        """From now on append to ``path`` (a fallback file on another disk, made now; ``continues``:
        the one this run made there before, checked to be that file), starting with what could not
        be written here. Returns the journal's length left in the original file."""
        with self._lock:
            try:
                fd, file_id = _open_journal(Path(path), continues, "the fallback journal")
            except OSError as e:
                raise JournalError(str(e) if isinstance(e, NotOurFile) else
                                   f"cannot open the fallback journal {path}: {e.strerror or e}") from e
            kept = os.fstat(self._fd).st_size
            os.close(self._fd)
            self._fd, self.path, self._diverted, self.file_id = fd, Path(path), True, file_id
            self._flush_locked()
            return kept

    def moved(self, path: Path | str) -> None:
        """The run folder was moved while the journal is open (its fd goes on writing there): segment
        rotations from now on are made beside ``path``. A diverted journal stays where it is."""
        with self._lock:
            if not self._diverted:
                self.path = Path(path)

    @property
    def position(self) -> tuple[int, int]:
        """(segment, bytes) of the journal on disk: every event written before the last flush that
        left ``pending_bytes`` at 0 ends at or before it."""
        return self.segment, self.size

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
            self.size += n
        if self._rotate_at is not None and self.size >= self._rotate_at and not self._diverted:
            self._rotate_locked()

    def _rotate_locked(self) -> None:
        """Close the live file into segment N and go on in a new one, N+1, that says so on its first
        line. ``events.jsonl`` is there at every moment (the closed name is a hard link first, then
        the new file is renamed over it). Any failure leaves the journal as it was, in one file,
        said in ``rotation_problem``; it is tried again after another eighth of a segment."""
        n = self.segment
        closed = seg.closed_path(self.path, n, compressed=False)
        tmp = self.path.with_name(f"{self.path.name}.new{os.getpid()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            return self._rotation_failed(f"cannot start journal segment {n + 1} ({e.strerror or e})")
        try:
            meta = seg.meta_line(n + 1, time.time())
            if os.write(fd, meta) != len(meta):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(self._fd)
            if FileId.of(os.lstat(self.path)) != self.file_id:  # never close a planted file into a segment
                raise NotOurFile(f"{self.path} is no longer the journal file this run writes (replaced?); "
                                 "the events go on in the file it made")
            os.link(self.path, closed)
            try:
                os.rename(tmp, self.path)
            except OSError:
                os.unlink(closed)
                raise
        except OSError as e:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return self._rotation_failed(f"cannot close journal segment {n} ({e.strerror or e})")
        os.close(self._fd)
        self._fd, self.segment, self.size, self.file_id = fd, n + 1, len(meta), FileId.of_fd(fd)
        self._rotate_at = self._segment_bytes
        self.rotations += 1
        try:
            seg.compress_segment(closed)
        except OSError as e:  # readers take the plain segment as well
            self.rotation_problem = f"journal segment {n} left uncompressed ({e.strerror or e})"

    def _rotation_failed(self, words: str) -> None:
        self.rotation_problem = words
        self._rotate_at = self.size + max(1, (self._segment_bytes or 0) // 8)

    def _error(self, e: OSError) -> JournalError:
        return JournalError(
            f"cannot write the event journal {self.path}: {e.strerror or e}; the {len(self._buf):,} bytes "
            "of events not written are kept in memory and written when there is room again (free disk "
            "space now); if there is none by the end of the run, they go to a fallback folder named then"
        )


def _open_journal(path: Path, continues: FileId | None, what: str) -> tuple[int, FileId]:
    """A journal file to append to: made now, or (``continues``) the very file made before."""
    if continues is None:
        return create_new(path, os.O_RDWR | os.O_APPEND, what)
    return reopen_same(path, os.O_RDWR | os.O_APPEND, continues, what), continues


def iter_journal(path: Path | str, problems: list[JournalProblem],
                 start: tuple[int, int] = (0, 0)) -> Iterator[Event]:
    """The journal's readable events one by one, in order, without holding the whole file (a long
    run replays in constant memory); each skipped line adds a JournalProblem to ``problems``.
    ``path`` is the live file; its closed segments beside it come first. ``start``: from this
    (segment, byte) position (a checkpoint's) instead of the beginning."""
    path = Path(path)
    if start == (0, 0) and not seg.closed_segments(path):  # one file: every journal before segments
        try:  # never through a symlink, a regular file only (a FIFO would block, /dev/zero never end)
            f = open_regular_stream(path, "a journal", follow=False)
        except OSError as e:
            raise JournalError(f"cannot read the event journal {path}: {e.strerror or e}") from e
        with f:
            yield from iter_journal_stream(f, problems)
        return
    if not path.exists() and not seg.closed_segments(path):
        raise JournalError(f"cannot read the event journal {path}: No such file or directory")
    with open_segments(path, problems, start) as f:
        yield from iter_journal_stream(f, problems)


def open_segments(path: Path, problems: list[JournalProblem], start: tuple[int, int] = (0, 0)) -> BinaryIO:
    """The journal's segments from ``start`` as one binary stream (a segment missing in the middle
    adds a JournalProblem, line 0, and is skipped)."""
    missing: list[str] = []
    chunks = seg.iter_segment_chunks(path, start[0], start[1], missing)
    return io.BufferedReader(_ChunkStream(chunks, missing, problems), 1 << 20)


class _ChunkStream(io.RawIOBase):
    def __init__(self, chunks: Iterator[tuple[int, bytes]], missing: list[str],
                 problems: list[JournalProblem]) -> None:
        self._chunks, self._missing, self._problems = chunks, missing, problems
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._left:
            try:
                _, self._left = next(self._chunks)
            except StopIteration:
                self._said()
                return 0
            self._said()
        n = min(len(b), len(self._left))
        b[:n] = self._left[:n]
        self._left = self._left[n:]
        return n

    def _said(self) -> None:
        while self._missing:
            self._problems.append(JournalProblem(0, self._missing.pop(0), ""))

    def close(self) -> None:
        self._chunks.close()  # type: ignore[attr-defined]
        super().close()


def iter_journal_stream(f: BinaryIO, problems: list[JournalProblem]) -> Iterator[Event]:
    """As iter_journal, from an open binary stream (a fallback's whole journal, for one). A line
    over MAX_LINE (none the recorder writes: a planted or broken file) is skipped without being held."""
    for no, (raw, over) in enumerate(bounded_lines(f, MAX_LINE), start=1):
        if over:
            problems.append(JournalProblem(no, f"a line of {over:,} bytes, over the {MAX_LINE >> 20} MiB a "
                                           "journal line can be: skipped", ""))
            continue
        if raw.startswith(seg.META_PREFIX):  # a segment's first line: not an event
            continue
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
