"""A run folder moved while its run is live: what the recorder writes from then on (checkpoints, the
journal's segment rotations) goes where the folder is now, never to the old path (recorder/run_journal.py,
store/journal.py). Real files and a real rename; the live recorder's side is tests/system/test_live_registry.py."""

from __future__ import annotations

import time

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.recorder.run_journal import RunJournal
from neurondesk.store.journal import JournalWriter, read_journal
from neurondesk.store.journal_segments import closed_segments
from neurondesk.store.rundir import RunPaths


def test_checkpoints_and_rotations_follow_a_moved_folder(tmp_path):
    old, new = tmp_path / "exp7", tmp_path / "exp7-kept"
    old.mkdir()
    notices: list[ev.Event] = []
    state = RunState()
    journal = RunJournal(RunPaths(old), "exp7", notices.append, time.time)
    journal.writer = JournalWriter(RunPaths(old).events, segment_bytes=4096)  # rotations within the test

    def record(n: int, first: int) -> None:
        for i in range(first, first + n):
            e = ev.Notice(t=1000.0 + i, level="info", message=f"event {i} " + "x" * 100)
            journal.write(e)
            state.apply(e)
        journal.flush(state)

    record(10, 0)
    journal.checkpoint(state, force=True)
    assert RunPaths(old).checkpoint.exists()
    old.rename(new)
    journal.moved(RunPaths(new))
    record(120, 10)  # past a segment or two: rotated beside the journal where it is now
    journal.checkpoint(state, force=True)
    journal.close()
    assert not old.exists()  # nothing made again at the old path
    assert [n.message for n in notices] == []  # no checkpoint or rotation failed
    assert closed_segments(new / "events.jsonl") and RunPaths(new).checkpoint.stat().st_mtime >= (new / "events.jsonl").stat().st_mtime - 5
    events, problems = read_journal(new / "events.jsonl")
    assert problems == [] and [e.message for e in events] == [f"event {i} " + "x" * 100 for i in range(130)]
