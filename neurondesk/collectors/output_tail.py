"""Read a growing output file (the run folder's stdout.log / stderr.log) line by line, each line
bounded before it is buffered.

A line is taken once its newline is written (or at the end, ``final``). Of a line longer than
MAX_LINE the first MAX_LINE bytes are kept and the rest is only counted: a 50 MB line with no
newline costs 64 KiB, one output line and one mark saying how many bytes were cut. The everyday
case is a progress bar redrawn with ``\\r`` that never prints a newline: what a terminal shows of
it is its last segment, so the last ``\\r`` segment of the cut part (up to REDRAW_MAX) is kept
too, after the mark, where the progress parsers look for it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MAX_LINE = 64 << 10  # bytes of one output line kept; the rest is counted
REDRAW_MAX = 4096  # bytes kept of the last \r segment of a cut line (a progress bar is ~200)
READ_CHUNK = 1 << 20
REPLACED_CHECK_S = 0.5  # how often, at the end of what was written, the path is checked for a new file


def cut_mark(cut: int) -> str:
    return f" …[{cut:,} more bytes of this line cut by neurondesk]"


class OutputTail:
    def __init__(self, path: Path, stream: str) -> None:
        self.path = path
        self.stream = stream
        self.fd: int | None = None
        self.partial = bytearray()  # the line in progress: at most MAX_LINE bytes
        self.cut = 0  # bytes of the line in progress past MAX_LINE, counted, not kept
        self.redraw: bytearray | None = None  # the last \r segment of the cut part (None: no \r in it)
        self._checked = float("-inf")  # monotonic time of the last _replaced check

    def read_lines(self, final: bool = False) -> list[str]:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                return []
        lines: list[str] = []
        while True:
            try:
                chunk = os.read(self.fd, READ_CHUNK)
            except BlockingIOError:  # not a regular file (the relay makes one): nothing to take
                chunk = b""
            if not chunk and self._replaced(final):  # removed and made again (the relay does): read the new one
                continue
            if not chunk:
                break
            self._take(chunk, lines)
        if final and (self.partial or self.cut):
            lines.append(self._line())
        return lines

    def _take(self, chunk: bytes, lines: list[str]) -> None:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            self._add(chunk[start:] if nl < 0 else chunk[start:nl])
            if nl < 0:
                return
            lines.append(self._line())
            start = nl + 1

    def _add(self, piece: bytes) -> None:
        room = MAX_LINE - len(self.partial)
        if room > 0:
            self.partial += piece[:room]
            piece = piece[room:]
        if not piece:
            return
        self.cut += len(piece)
        r = piece.rfind(b"\r")
        if r >= 0:
            self.redraw = bytearray(piece[r + 1:r + 1 + REDRAW_MAX])
        elif self.redraw is not None and len(self.redraw) < REDRAW_MAX:
            self.redraw += piece[:REDRAW_MAX - len(self.redraw)]

    def _line(self) -> str:
        text = self._text(bytes(self.partial))
        if self.cut:
            text += cut_mark(self.cut)
            redraw = self._text(bytes(self.redraw or b""))
            if redraw.strip():
                text += "\r" + redraw
        self.partial, self.cut, self.redraw = bytearray(), 0, None
        return text

    def _replaced(self, final: bool = False) -> bool:
        """At the end of what we read: is the file at ``path`` another one now? Then it is read from
        its start. Checked every REPLACED_CHECK_S at most (two stat calls a poll, 20 polls a second)."""
        now_t = time.monotonic()
        if now_t - self._checked < REPLACED_CHECK_S and not final:
            return False
        self._checked = now_t
        try:
            now, ours = os.stat(self.path, follow_symlinks=False), os.fstat(self.fd)
            if (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino):
                return False
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return False
        os.close(self.fd)
        self.fd = fd
        return True

    @staticmethod
    def _text(raw: bytes) -> str:
        return raw.decode("utf-8", "replace").rstrip("\r")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
