"""Follow a journal another process is writing: each ``read_new()`` returns the events appended
since the last call. A line is taken only once its newline is there (the writer may be half-way
through it); a malformed line is skipped and counted, as everywhere a journal is read. Segments
and a rotation under a reader: see store/journal_segments.py."""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.core.events.codec import decode_event_line
from neurondesk.store import journal_segments as seg
from neurondesk.store.journal import MAX_LINE, JournalProblem

READ_CHUNK = 1 << 20


class JournalTail:
    """``start``: (segment, byte) to begin at (a checkpoint's position). The journal's closed
    segments are read in order before the live file; when the live file is rotated away under
    us, it is read to its end and the next segment follows (store/journal_segments.py)."""

    def __init__(self, path: Path | str, start: tuple[int, int] = (0, 0)) -> None:
        self.path = Path(path)
        self.segment, self._offset = start
        self.stream: seg.SegmentStream | None = None
        self.partial = b""
        self._skipping = False  # inside a line over MAX_LINE, already counted
        self.line_no = 0
        self.problems: list[JournalProblem] = []
        self.problem_count = 0
        self.rotations_seen = 0

    @property
    def fd(self) -> int | None:
        return self.stream.fd if self.stream is not None else None

    def _open(self) -> bool:
        while self.stream is None:
            stream, live = seg.open_segment(self.path, self.segment)
            if stream is None:
                if live is not None and live > self.segment:  # deleted by hand: say it, go on
                    self._problem(JournalProblem(0, seg.missing_words(self.path, self.segment), ""))
                    self.segment, self._offset, self.partial = self.segment + 1, 0, b""
                    continue
                return False
            if self._offset:
                try:
                    stream.skip(self._offset) if stream.path.name.endswith(seg.ZST) else \
                        os.lseek(stream.fd, self._offset, os.SEEK_SET)
                except EOFError as e:
                    self._problem(JournalProblem(0, str(e), ""))
                self._offset = 0
            self.stream = stream
        return True

    def _problem(self, problem: JournalProblem) -> None:
        self.problem_count += 1
        if len(self.problems) < 100:
            self.problems.append(problem)

    def read_new(self, max_bytes: int = 8 * READ_CHUNK) -> list:
        """Events appended since the last call (at most about ``max_bytes`` of them)."""
        events: list = []
        taken = 0
        while taken < max_bytes and self._open():
            chunk = self.stream.read(READ_CHUNK)
            if not chunk:
                if not self.stream.rotated(self.path):
                    break
                chunk = self.stream.read(READ_CHUNK)  # written before the rename
                if not chunk:
                    self._next_segment()
                    continue
            taken += len(chunk)
            self._lines(self.partial + chunk, events)
        return events

    def _next_segment(self) -> None:
        if self.partial.strip():  # a segment ends with a whole line; this one was cut
            self.line_no += 1
            self._problem(JournalProblem(self.line_no, f"torn last line of journal segment {self.segment}",
                                         self.partial.decode("utf-8", "replace")[:200]))
        self.partial = b""
        self.stream.close()
        self.stream = None
        self.segment += 1
        self.rotations_seen += 1

    def _lines(self, data: bytes, events: list) -> None:
        lines = data.split(b"\n")
        self.partial = lines.pop()
        if self._skipping and lines:  # the end of a line over MAX_LINE: said when it began
            self._skipping = False
            lines.pop(0)
        elif self._skipping:
            self.partial = b""
        if len(self.partial) > MAX_LINE:  # no event is this long: not held (a planted or broken file)
            self.line_no += 1
            self._problem(JournalProblem(self.line_no, f"a line over the {MAX_LINE >> 20} MiB a journal line "
                                         "can be: skipped", ""))
            self.partial, self._skipping = b"", True
        for raw in lines:
            self.line_no += 1
            if not raw.strip() or raw.startswith(seg.META_PREFIX):
                continue
            event, problem = decode_journal_line(raw, self.line_no)
            if event is not None:
                events.append(event)
            else:
                self._problem(problem)

    def continue_in(self, path: Path | str) -> JournalTail:
        """A tail of ``path``, the same journal going on in another file (a fallback folder's
        remainder): a line cut where this file ended is completed there."""
        nxt = JournalTail(path)
        nxt.partial, nxt.line_no, nxt._skipping = self.partial, self.line_no, self._skipping
        nxt.problems, nxt.problem_count = self.problems, self.problem_count
        self.close()
        return nxt

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None


def decode_journal_line(raw: bytes, line_no: int):
    """(event, None) or (None, JournalProblem): the same validating decoder every reader uses."""
    try:
        return decode_event_line(raw), None
    except ValueError as e:  # EventDecodeError: not JSON, unknown kind, wrong field types
        return None, JournalProblem(line_no, str(e), raw.decode("utf-8", "replace")[:200])
