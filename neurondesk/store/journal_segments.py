"""A journal in segments: the live file ``events.jsonl`` and, once it grew past its size, closed
segments beside it, numbered in order and compressed with zstd.

    events.000000.jsonl.zst   segment 0 (the first; the live file of a short run never rotates)
    events.000001.jsonl.zst   segment 1
    events.jsonl              the live segment (2): its first line says so

Rotation (the writer, store/journal.py): the live file is renamed to ``events.NNNNNN.jsonl``
(complete: nothing is written to it again), a new ``events.jsonl`` starts with the line
``{"journal":"segment","segment":N+1,...}`` (not an event: every reader skips it), then the
closed file is compressed beside itself (``.zst.tmp``, fsynced, renamed) and the plain one
removed. At any moment segment N is one of: ``events.NNNNNN.jsonl``, ``events.NNNNNN.jsonl.zst``,
or ``events.jsonl`` whose first line names N (segment 0: no such line). A journal of one file
(every journal written before segments existed) is segment 0 alone, read as it always was.

A reader holding the live file open sees the rotation as end of file on a descriptor whose inode
is no longer ``events.jsonl``'s: what was written before the rename is all there, so it reads to
the end, then goes on with the next segment. A segment missing from the middle (deleted by hand)
is said once, by number and file name, and reading goes on with the next.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import zstandard

from neurondesk.store.input_files import open_regular

META_PREFIX = b'{"journal":"segment"'
ZST = ".zst"
_CLOSED = re.compile(r"\.(\d{6})\.jsonl(\.zst)?$")
COMPRESS_LEVEL = 3  # about 7x on step lines, at well over 100 MB/s


def meta_line(segment: int, t: float) -> bytes:
    return json.dumps({"journal": "segment", "segment": segment, "t": t},
                      separators=(",", ":")).encode() + b"\n"


def is_meta(raw: bytes) -> bool:
    return raw.startswith(META_PREFIX)


def closed_path(events: Path, n: int, compressed: bool) -> Path:
    stem = events.name.removesuffix(".jsonl")
    return events.with_name(f"{stem}.{n:06d}.jsonl{ZST if compressed else ''}")


def closed_segments(events: Path) -> dict[int, Path]:
    """Closed segments beside ``events`` by number (the plain file where both are there: it is
    complete, and cheaper to read)."""
    stem = events.name.removesuffix(".jsonl") + "."
    found: dict[int, Path] = {}
    try:
        names = os.listdir(events.parent)
    except OSError:
        return found
    for name in names:
        if not name.startswith(stem):
            continue
        m = _CLOSED.search(name)
        if m is None or name != f"{stem}{m.group(1)}.jsonl{m.group(2) or ''}":
            continue
        n = int(m.group(1))
        if n not in found or not m.group(2):
            found[n] = events.with_name(name)
    return found


def segment_of_file(fd: int) -> int | None:
    """The segment number an open live file names on its first line (0 when it has none); None
    when the file is empty (a rotation not finished yet)."""
    head = os.pread(fd, 200, 0)
    if not head:
        return None
    if not is_meta(head):
        return 0
    try:
        return int(json.loads(head.split(b"\n", 1)[0])["segment"])
    except (ValueError, KeyError, TypeError):
        return 0


def open_nofollow(path: Path) -> int:
    """A journal file, never through a symlink, only when it is a regular file (a FIFO in its place
    would block the open: InputRefused, an OSError, instead)."""
    return open_regular(path, "a journal", follow=False)


class SegmentStream:
    """One segment's bytes, from an offset: a plain file read through its descriptor, or a
    compressed one through a zstd reader (an offset into it is skipped by decompressing)."""

    def __init__(self, number: int, path: Path, fd: int, live: bool, offset: int = 0) -> None:
        self.number, self.path, self.fd, self.live = number, path, fd, live
        self._zst: BinaryIO | None = None
        self.position = 0
        if path.name.endswith(ZST):
            self._file = os.fdopen(fd, "rb", closefd=False)
            self._zst = zstandard.ZstdDecompressor().stream_reader(self._file, read_across_frames=True)
            self.skip(offset)
        elif offset:
            os.lseek(fd, offset, os.SEEK_SET)
            self.position = offset

    def skip(self, n: int) -> None:
        while n > 0:
            chunk = self.read(min(n, 1 << 20))
            if not chunk:
                raise EOFError(f"{self.path} ends before byte {self.position + n:,}")
            n -= len(chunk)

    def read(self, n: int) -> bytes:
        data = self._zst.read(n) if self._zst is not None else os.read(self.fd, n)
        self.position += len(data)
        return data

    def rotated(self, events: Path) -> bool:
        """The live file this reads was renamed away (it is complete: the next segment follows)."""
        if not self.live:
            return True
        try:
            st = os.stat(events, follow_symlinks=False)
        except FileNotFoundError:
            return bool(closed_segments(events).get(self.number))
        mine = os.fstat(self.fd)
        return (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev)

    def close(self) -> None:
        if self._zst is not None:
            self._zst.close()
            self._file.close()
            self._zst = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_segment(events: Path, n: int) -> tuple[SegmentStream | None, int | None]:
    """Segment ``n`` of the journal ``events`` (opened at its start), or (None, k) where k is the
    number of the live file when segment ``n`` cannot be found (k > n: ``n`` is missing; None
    also when nothing is there yet)."""
    for _ in range(3):  # a rotation may rename what we look for between two looks
        closed = closed_segments(events).get(n)
        if closed is not None:
            try:
                return SegmentStream(n, closed, open_nofollow(closed), live=False), None
            except FileNotFoundError:  # compressed and removed just now: look again
                continue
        try:
            fd = open_nofollow(events)
        except FileNotFoundError:
            return None, None
        live = segment_of_file(fd)
        if live == n:
            return SegmentStream(n, events, fd, live=True), None
        os.close(fd)
        if live is None or live < n:
            return None, live
        if closed_segments(events).get(n) is None:
            return None, live
    return None, None


def compress_segment(plain: Path) -> Path:
    """Compress a closed segment beside itself (temp file, fsync, rename), then remove the plain
    one. Returns the compressed file; on OSError the plain one stays (readers take either)."""
    out = plain.with_name(plain.name + ZST)
    tmp = plain.with_name(plain.name + ZST + f".tmp{os.getpid()}")
    fd_in = open_nofollow(plain)
    try:
        fd_out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd_in, "rb", closefd=False) as src, os.fdopen(fd_out, "wb", closefd=False) as dst:
                zstandard.ZstdCompressor(level=COMPRESS_LEVEL).copy_stream(src, dst)
                dst.flush()
                os.fsync(fd_out)
        finally:
            os.close(fd_out)
        os.rename(tmp, out)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.close(fd_in)
    os.unlink(plain)
    return out


def missing_words(events: Path, n: int) -> str:
    return (f"journal segment {n} ({closed_path(events, n, True).name}) is missing (deleted?): its events "
            "are not in these figures; the later segments are read")


def iter_segment_chunks(events: Path, start: int = 0, offset: int = 0,
                        missing: list[str] | None = None) -> Iterator[tuple[int, bytes]]:
    """(segment number, bytes) of the whole journal from segment ``start`` at ``offset``, to the
    end of the live file as it is now; a segment deleted by hand adds a line to ``missing``."""
    n = start
    while True:
        seg, live = open_segment(events, n)
        if seg is None:
            if live is not None and live > n:
                if missing is not None:
                    missing.append(missing_words(events, n))
                n, offset = n + 1, 0
                continue
            return
        try:
            if offset:
                if seg._zst is not None:
                    seg.skip(offset)
                else:
                    os.lseek(seg.fd, offset, os.SEEK_SET)
            while True:
                chunk = seg.read(1 << 20)
                if chunk:
                    yield n, chunk
                    continue
                if seg.rotated(events):
                    chunk = seg.read(1 << 20)  # written before the rename: drain, then move on
                    if chunk:
                        yield n, chunk
                        continue
                    break
                return
        finally:
            seg.close()
        n, offset = n + 1, 0
