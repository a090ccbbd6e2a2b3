"""Following a journal that another process is writing: half-written lines wait for their
newline, bad lines are counted and skipped, nothing is read twice."""

from __future__ import annotations

import os

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import encode_event
from neurondesk.store.journal_tail import JournalTail

# the journal under the newest zstandard and msgspec too (make test-latest)
pytestmark = pytest.mark.latest


def test_follow_takes_whole_lines_only_and_counts_bad_ones(tmp_path):
    path = tmp_path / "events.jsonl"
    tail = JournalTail(path)
    assert tail.read_new() == []  # not created yet: nothing, no error
    one = encode_event(ev.Notice(t=1.0, level="warn", message="first"))
    two = encode_event(ev.StepEnded(t=2.0, pid=7, step=0, duration_s=0.5))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, one + two[:10])  # the writer is half-way through the second line
        got = tail.read_new()
        assert [e.kind for e in got] == ["notice"] and got[0].message == "first"
        os.write(fd, two[10:])
        assert [(e.kind, e.step) for e in tail.read_new()] == [("step", 0)]
        os.write(fd, b'{"kind":"step","t":"abc","pid":7,"step":1,"duration_s":0.1}\n' + one)
        got = tail.read_new()
        assert [e.kind for e in got] == ["notice"]
        assert tail.problem_count == 1 and tail.problems[0].line == 3 and "step" in tail.problems[0].error
        assert tail.read_new() == []
    finally:
        os.close(fd)
        tail.close()
