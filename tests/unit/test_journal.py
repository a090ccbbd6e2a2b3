"""The journal against real files, including a full disk (/dev/full)."""

import json
import os

import pytest

from neurondesk.core.events.run_events import CompileFinished, OutputLine, RunFinished, RunStarted, StepEnded
from neurondesk.store.journal import JournalError, JournalWriter, read_journal
from neurondesk.store.own_files import FileId

# the journal under the newest zstandard and msgspec too (make test-latest)
pytestmark = pytest.mark.latest

EVENTS = [
    RunStarted(t=1.0, run_id="20260101-120000-ab12", command=["python", "train.py"], price_per_hour=1.34375),
    StepEnded(t=2.0, pid=7, step=0, duration_s=0.5, samples=32, input_shapes=[[32, 128]]),
    CompileFinished(t=2.5, source="probe", duration_s=41.0, frames=["train.py:12"], input_shapes=[[32, 128]]),
    OutputLine(t=3.0, stream="stderr", text="loss 1.5 — naïve \udcff byte"),  # undecodable byte kept
    RunFinished(t=4.0, exit_code=0),
]


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_round_trip(tmp_path):
    path = tmp_path / "events.jsonl"
    with JournalWriter(path) as w:
        for e in EVENTS:
            w.write(e)
    events, problems = read_journal(path)
    assert events == EVENTS
    assert problems == []
    assert len(path.read_bytes().splitlines()) == len(EVENTS)


def test_flushes_when_a_write_finds_the_last_flush_over_a_second_old(tmp_path):
    path = tmp_path / "events.jsonl"
    clock = FakeClock()
    w = JournalWriter(path, clock=clock)
    w.write(EVENTS[0])
    clock.now += 0.5
    w.write(EVENTS[1])
    assert path.stat().st_size == 0 and w.pending_bytes > 0  # buffered
    clock.now += 0.6  # 1.1 s since the last flush
    w.write(EVENTS[2])
    assert w.pending_bytes == 0
    assert read_journal(path)[0] == EVENTS[:3]
    w.write(EVENTS[3])
    w.flush()  # the owner's timer
    assert read_journal(path)[0] == EVENTS[:4]
    w.close()
    with pytest.raises(JournalError, match="closed"):
        w.write(EVENTS[4])


def test_full_disk_raises_a_clear_error_and_keeps_the_events(tmp_path):
    w = JournalWriter("/dev/full", continues=FileId.of(os.stat("/dev/full")))  # a file to continue, not made
    w.write(EVENTS[0])
    pending = w.pending_bytes
    with pytest.raises(JournalError) as info:
        w.flush()
    msg = str(info.value)
    assert "/dev/full" in msg and "free disk space" in msg and "kept in memory" in msg
    assert w.pending_bytes == pending  # nothing dropped
    with pytest.raises(JournalError):
        w.close()  # close cannot pretend it succeeded
    os.close(w.fileno())


def test_after_a_full_disk_a_later_flush_writes_everything_exactly_once(tmp_path):
    path = tmp_path / "events.jsonl"
    clock = FakeClock()
    w = JournalWriter(path, clock=clock)
    w.write(EVENTS[0])
    w.flush()
    saved = os.dup(w.fileno())  # the real file (shares its O_APPEND description)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, w.fileno())  # the disk "fills up"
        w.write(EVENTS[1])
        clock.now += 2
        with pytest.raises(JournalError):
            w.write(EVENTS[2])  # the write that triggers the flush reports it ...
        w.write(EVENTS[3])  # ... and later writes are still accepted
        os.dup2(saved, w.fileno())  # space freed
        w.close()
    finally:
        os.close(saved)
        os.close(full)
    events, problems = read_journal(path)
    assert events == EVENTS[:4]
    assert problems == []


def test_reader_skips_and_reports_bad_lines(tmp_path):
    path = tmp_path / "events.jsonl"
    good = [
        json.dumps({"kind": "loss", "t": 1.0, "value": 2.5, "future_key": 1}),
        json.dumps({"kind": "run_finished", "t": 9.0, "exit_code": 1}),
    ]
    lines = [
        good[0],
        "{not json",
        json.dumps({"kind": "quantum_flux", "t": 1.0}),
        "[1, 2]",
        json.dumps({"kind": "step", "t": 1.0}),  # required fields missing
        "",
        good[1],
    ]
    path.write_text("\n".join(lines) + "\n" + '{"kind": "step", "t": 3.0, "pi')  # torn by a kill
    events, problems = read_journal(path)
    assert [e.kind for e in events] == ["loss", "run_finished"]
    assert [p.line for p in problems] == [2, 3, 4, 5, 8]
    assert "unknown event kind 'quantum_flux'" in problems[1].error
    assert problems[-1].error.startswith("torn last line")
    assert not problems[0].error.startswith("torn")


def test_a_line_with_a_field_of_the_wrong_type_is_skipped_with_its_reason(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [
        json.dumps({"kind": "step", "t": 1.0, "pid": 1, "step": 0, "duration_s": 0.1}),
        json.dumps({"kind": "step", "t": "abc", "pid": 1, "step": 1, "duration_s": 0.1}),
        json.dumps({"kind": "host_sample", "t": 2.0, "per_cpu_percent": ["busy"]}),
        json.dumps({"kind": "process_tree", "t": 3.0, "processes": [{"pid": "one"}]}),
        json.dumps({"kind": "loss", "t": 4.0, "value": 2.5}),
    ]
    path.write_text("\n".join(lines) + "\n")
    events, problems = read_journal(path)
    assert [e.kind for e in events] == ["step", "loss"]
    assert [p.line for p in problems] == [2, 3, 4]
    assert "Expected `float`, got `str` - at `$.t`" in problems[0].error
    assert "$.per_cpu_percent[0]" in problems[1].error and "$.processes[0].pid" in problems[2].error
    assert problems[0].raw.startswith('{"kind": "step", "t": "abc"')


def test_lines_are_compact_json_with_the_kind_first(tmp_path):
    path = tmp_path / "events.jsonl"
    with JournalWriter(path) as w:
        w.write(EVENTS[1])
    line = path.read_bytes()
    assert line.startswith(b'{"kind":"step","t":2.0,') and line.endswith(b"}\n")
    assert json.loads(line)["input_shapes"] == [[32, 128]]


def test_appending_after_a_torn_line_keeps_the_new_events_readable(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"kind": "loss", "t": 1.0, "value": 2.5}) + '\n{"kind": "lo')
    with JournalWriter(path, continues=FileId.of(path.stat())) as w:  # the journal it goes on with
        w.write(EVENTS[4])
    events, problems = read_journal(path)
    assert events[-1] == EVENTS[4]
    assert [p.line for p in problems] == [2]


def test_unopenable_and_unreadable_paths_name_the_path(tmp_path):
    missing = tmp_path / "no-such-dir" / "events.jsonl"
    with pytest.raises(JournalError, match="no-such-dir"):
        JournalWriter(missing)
    with pytest.raises(JournalError, match="no-such-dir"):
        read_journal(missing)


def test_journal_is_private_and_never_opened_through_a_symlink(tmp_path):
    w = JournalWriter(tmp_path / "events.jsonl")
    w.close()
    assert os.stat(tmp_path / "events.jsonl").st_mode & 0o777 == 0o600
    target = tmp_path / "victim"
    target.write_text("precious")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "events.jsonl").symlink_to(target)
    with pytest.raises(JournalError, match="symbolic link"):
        JournalWriter(tmp_path / "d" / "events.jsonl")
    assert target.read_text() == "precious"
