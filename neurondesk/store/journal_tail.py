"""Follow a journal another process is writing: each ``read_new()`` returns the events appended
since the last call. A line is taken only once its newline is there (the writer may be half-way
through it); a malformed line is skipped and counted, as everywhere a journal is read."""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.core.codec import decode_event_line
from neurondesk.store.journal import JournalProblem

READ_CHUNK = 1 << 20


class JournalTail:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.fd: int | None = None
        self.partial = b""
        self.line_no = 0
        self.problems: list[JournalProblem] = []
        self.problem_count = 0

    def _open(self) -> bool:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                return False
        return True

    def read_new(self, max_bytes: int = 8 * READ_CHUNK) -> list:
        """Events appended since the last call (at most about ``max_bytes`` of them)."""
        if not self._open():
            return []
        events = []
        taken = 0
        while taken < max_bytes:
            chunk = os.read(self.fd, READ_CHUNK)
            if not chunk:
                break
            taken += len(chunk)
            data = self.partial + chunk
            lines = data.split(b"\n")
            self.partial = lines.pop()
            for raw in lines:
                self.line_no += 1
                if not raw.strip():
                    continue
                event, problem = decode_journal_line(raw, self.line_no)
                if event is not None:
                    events.append(event)
                else:
                    self.problem_count += 1
                    if len(self.problems) < 100:
                        self.problems.append(problem)
        return events

    def continue_in(self, path: Path | str) -> JournalTail:
        """A tail of ``path``, the same journal going on in another file (a fallback folder's
        remainder): a line cut where this file ended is completed there."""
        nxt = JournalTail(path)
        nxt.partial, nxt.line_no = self.partial, self.line_no
        nxt.problems, nxt.problem_count = self.problems, self.problem_count
        self.close()
        return nxt

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def decode_journal_line(raw: bytes, line_no: int):
    """(event, None) or (None, JournalProblem): the same validating decoder every reader uses."""
    try:
        return decode_event_line(raw), None
    except ValueError as e:  # EventDecodeError: not JSON, unknown kind, wrong field types
        return None, JournalProblem(line_no, str(e), raw.decode("utf-8", "replace")[:200])
