"""Checkpoints of the reduced state: a reader that starts from one and reduces only the journal
after it gets the same state as the full reduction (recorded journals and generated ones, cut
anywhere, across segment rotations); a torn, corrupt, foreign or older checkpoint is never used
(the whole journal is reduced, said once); a journal segment deleted by hand is said and skipped."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from state_canon import canon

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.recorder.checkpointing import Checkpointer
from neurondesk.sources.rebuild import resume, state_from_run_dir
from neurondesk.sources.replay import ReplaySource
from neurondesk.store import checkpoint as ck
from neurondesk.store.journal import JournalWriter, iter_journal, read_journal
from neurondesk.store.journal_tail import JournalTail
from neurondesk.store.own_files import FileId
from neurondesk.store.rundir import RunPaths

# the reducer checkpoint under the newest msgspec too (make test-latest)
pytestmark = pytest.mark.latest

JOURNALS = DATA / "journals"
RECORDED = sorted(p.name for p in JOURNALS.iterdir())


def full(path: Path) -> RunState:
    state = RunState()
    for e in iter_journal(path, []):
        state.apply(e)
    return state


def line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, b in enumerate(data) if b == 0x0A]


# ---------------------------------------------------------------- checkpoint + tail == full
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(RECORDED), cut=st.floats(0, 1))
def test_checkpoint_plus_tail_equals_the_full_reduction_of_recorded_journals(name, cut):
    data = (JOURNALS / name / "events.jsonl").read_bytes()
    ends = line_ends(data)
    k = int(cut * (len(ends) - 1))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "events.jsonl").write_bytes(data)
        head = RunState()
        with open(run / "events.jsonl", "rb") as f:
            prefix = f.read(ends[k])
        (run / "head.jsonl").write_bytes(prefix)
        for e in iter_journal(run / "head.jsonl", []):
            head.apply(e)
        ck.write_checkpoint(run, head, run / "events.jsonl", (0, ends[k]))
        notes: list[str] = []
        state, start = resume(run, run / "events.jsonl", notes=notes)
        assert start == (0, ends[k]) and notes == []
        resumed, _ = state_from_run_dir(run)
        assert canon(resumed) == canon(full(JOURNALS / name / "events.jsonl"))


def _events(draw_steps: list[tuple[int, float, int, float]], extras: list[int]) -> list[ev.Event]:
    out: list[ev.Event] = [ev.RunStarted(t=100.0, run_id="gen", command=["python", "train.py"], warmup_steps=3)]
    t = 100.0
    steps = {11: 0, 12: 0}
    out += [ev.ProcessAttached(t=t, pid=11, rank=0), ev.ProcessAttached(t=t, pid=12, rank=1)]
    for i, (pid_pick, duration, compiles, wait) in enumerate(draw_steps):
        pid = 11 if pid_pick % 3 else 12
        t += duration
        kind = extras[i % len(extras)] if extras else 0
        if kind == 1:
            out.append(ev.CompileFinished(t=t, source="probe", duration_s=duration * 10, pid=pid, step=steps[pid],
                                          graph_hash=f"g{i % 4}"))
        elif kind == 2:
            out.append(ev.Notice(t=t, level="warn", message=f"notice {i}"))
        elif kind == 3:
            out.append(ev.OutputLine(t=t, stream="stdout", text=f"step {i} loss {1 / (i + 1):.4f}"))
        elif kind == 4:
            out.append(ev.LossReported(t=t, value=1 / (i + 1), step=steps[pid]))
        out.append(ev.StepEnded(t=t, pid=pid, step=steps[pid], duration_s=duration, samples=8, tokens=64,
                                data_wait_s=wait, compiles=compiles, presync_s=duration / 2))
        steps[pid] += 1
    out.append(ev.RunFinished(t=t + 1, exit_code=0))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.integers(0, 5), st.floats(1e-4, 2.0), st.integers(0, 1) | st.just(0),
                                st.floats(0, 1e-2)), min_size=1, max_size=400),
       extras=st.lists(st.integers(0, 8), max_size=20), cut=st.floats(0, 1), segment=st.integers(300, 6000))
def test_checkpoint_plus_tail_equals_the_full_reduction_of_generated_journals(steps, extras, cut, segment):
    events = _events(steps, extras)
    k = int(cut * len(events))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        writer = JournalWriter(run / "events.jsonl", segment_bytes=segment)  # rotations on the way
        live = RunState()
        for i, e in enumerate(events[:k]):
            writer.write(e)
            live.apply(e)
            if i % 10 == 0:
                writer.flush()
        writer.flush()
        Checkpointer(run, every_events=1).after_flush(live, writer)  # as the recorder does
        for i, e in enumerate(events[k:]):
            writer.write(e)
            if i % 10 == 0:
                writer.flush()
        writer.close()
        resumed, problems = state_from_run_dir(run)
        assert problems == []
        expect = RunState()
        for e in events:
            expect.apply(e)
        assert canon(resumed) == canon(expect) == canon(full(run / "events.jsonl"))


def test_the_recorders_own_state_and_its_checkpoint_equal_the_journal_reduced_from_disk(tmp_path):
    """The recorder checkpoints the events as it reduced them; a reader reduces them as decoded
    from disk: the two must be the same state (codec round trip included)."""
    events, _ = read_journal(JOURNALS / "dynamic" / "events.jsonl")
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=20_000)
    live = RunState()
    for i, e in enumerate(events):
        writer.write(e)
        live.apply(e)
        if i % 50 == 0:
            writer.flush()  # the recorder flushes after each batch: a rotation is due then
    writer.flush()
    Checkpointer(tmp_path).after_flush(live, writer)
    writer.close()
    assert writer.rotations > 3
    found = ck.best_checkpoint(tmp_path, tmp_path / "events.jsonl")
    assert found is not None and found.events == len(events)
    assert canon(found.state) == canon(full(tmp_path / "events.jsonl")) == canon(full(JOURNALS / "dynamic" / "events.jsonl"))


# ---------------------------------------------------------------- a checkpoint is never used when wrong
def _checkpointed_run(tmp_path: Path, n: int = 300) -> tuple[Path, list[ev.Event]]:
    events = _events([(1, 0.05 + i * 1e-5, 0, 1e-3) for i in range(n)], [0, 0, 3])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=None)
    state = RunState()
    for e in events[: n // 2]:
        writer.write(e)
        state.apply(e)
    writer.flush()
    assert Checkpointer(tmp_path, every_events=1).after_flush(state, writer) is None
    for e in events[n // 2:]:
        writer.write(e)
    writer.close()
    return tmp_path, events


def _payload_at(path: Path) -> int:
    data = path.read_bytes()
    return data.index(b"\n", len(ck.MAGIC)) + 1


@pytest.mark.parametrize("damage, reason", [
    ("truncate", "torn"),
    ("flip", "corrupt"),
    ("older", "format"),
    ("reducers", "another version"),
    ("garbage", "not a neurondesk checkpoint"),
    ("journal", "does not match the journal"),
])
def test_a_damaged_checkpoint_is_never_used_rebuilt_once_and_said_once(tmp_path, damage, reason):
    run, events = _checkpointed_run(tmp_path)
    RunPaths(run).segment_checkpoint(0).unlink()  # the same state under its segment's name: only the latest here
    path = RunPaths(run).checkpoint
    data = bytearray(path.read_bytes())
    at = _payload_at(path)
    if damage == "truncate":
        data = data[: at + (len(data) - at) // 2]
    elif damage == "flip":
        data[at + 10] ^= 0xFF
    elif damage in ("older", "reducers"):
        header = json.loads(data[len(ck.MAGIC):at])
        header["format" if damage == "older" else "reducers"] = 0 if damage == "older" else "0" * 32
        data = bytearray(ck.MAGIC + json.dumps(header).encode() + b"\n" + bytes(data[at:]))
    elif damage == "garbage":
        data = bytearray(b"\x00" * 64)
    elif damage == "journal":  # another run's journal put in its place
        shutil.copy(JOURNALS / "dynamic" / "events.jsonl", run / "events.jsonl")
    path.write_bytes(bytes(data))
    notes: list[str] = []
    state, problems = state_from_run_dir(run, notes=notes)
    assert len(notes) == 1 and reason in notes[0] and "whole journal" in notes[0] and "rebuilt" in notes[0]
    expect = full(JOURNALS / "dynamic" / "events.jsonl") if damage == "journal" else full(run / "events.jsonl")
    if damage != "journal":
        assert state.event_count == len(events)
    assert canon(state) == canon(expect)
    # replaced: the next reader loads it, from the journal's end, and says nothing
    again: list[str] = []
    assert resume(run, run / "events.jsonl", notes=again)[1] == (0, (run / "events.jsonl").stat().st_size)
    state, _ = state_from_run_dir(run, notes=again)
    assert again == [] and canon(state) == canon(expect)
    log = RunPaths(run).recorder_log.read_text().splitlines()
    assert len(log) == 1 and reason in log[0] and "rebuilt" in log[0]


@pytest.mark.parametrize("as_format", [1, ck.FORMAT])
def test_a_crafted_pickle_planted_as_the_checkpoint_is_refused_and_runs_nothing(tmp_path, as_format):
    """A pickle whose reduce would create a marker file, under an old (format 1, pickled) header and
    under a current header with a matching digest and sizes: never unpickled, nothing runs."""
    run, events = _checkpointed_run(tmp_path)
    RunPaths(run).segment_checkpoint(0).unlink()
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(str(marker)))
    import hashlib

    import zstandard
    body = zstandard.ZstdCompressor().compress(payload)
    path = RunPaths(run).checkpoint
    at = _payload_at(path)
    header = json.loads(path.read_bytes()[len(ck.MAGIC):at])
    header.update(format=as_format, payload_bytes=len(body), state_bytes=len(payload),
                  payload_blake2b=hashlib.blake2b(body, digest_size=16).hexdigest())
    path.write_bytes(ck.MAGIC + json.dumps(header).encode() + b"\n" + body)
    notes: list[str] = []
    state, _ = state_from_run_dir(run, notes=notes)
    assert not marker.exists()
    why = "written by an older neurondesk" if as_format == 1 else "cannot be loaded (not a state table"
    assert len(notes) == 1 and why in notes[0], notes
    assert state.event_count == len(events)


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_bad_latest_checkpoint_falls_back_to_an_older_good_one(tmp_path):
    events = _events([(1, 0.05, 0, 1e-3)] * 600, [0])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=20_000)
    state = RunState()
    cp = Checkpointer(tmp_path, every_events=100)
    for e in events:
        writer.write(e)
        state.apply(e)
        writer.flush()
        cp.after_flush(state, writer)
    writer.close()
    assert len(ck.checkpoint_files(tmp_path)) > 2
    RunPaths(tmp_path).checkpoint.write_bytes(b"NDCHECKPOINT\n{")
    notes: list[str] = []
    resumed, _ = state_from_run_dir(tmp_path, notes=notes)
    assert len(notes) == 1 and notes[0].startswith("checkpoint not used, checkpoint.bin: its header is cut")
    assert "rebuilt" in notes[0]
    assert canon(resumed) == canon(full(tmp_path / "events.jsonl"))


# ---------------------------------------------------------------- writing: atomic, private, never torn
def test_the_checkpoint_file_is_private_and_not_written_through_a_symlink(tmp_path):
    run, _ = _checkpointed_run(tmp_path)
    assert RunPaths(run).checkpoint.stat().st_mode & 0o777 == 0o600
    RunPaths(run).checkpoint.unlink()
    RunPaths(run).checkpoint.symlink_to(tmp_path / "elsewhere")
    state = full(run / "events.jsonl")
    ck.write_checkpoint(run, state, run / "events.jsonl", (0, (run / "events.jsonl").stat().st_size))
    assert not (tmp_path / "elsewhere").exists()  # the rename replaced the link itself
    assert not RunPaths(run).checkpoint.is_symlink()
    assert ck.best_checkpoint(run, run / "events.jsonl") is not None


def test_two_writers_racing_for_one_folder_leave_one_whole_checkpoint(tmp_path):
    """Two recorders cannot own one folder (the lock), but even two writers at once never leave
    a mixed file: each renames a whole one of its own over the other's."""
    run, _ = _checkpointed_run(tmp_path)
    journal = run / "events.jsonl"
    size = journal.stat().st_size
    state = full(journal)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for _ in range(n):
                ck.write_checkpoint(run, state, journal, (0, size))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    # the same pid: distinct temp names need distinct processes; threads share one, so serialise
    # on O_EXCL — a clash is an error, never a torn file
    threads = [threading.Thread(target=write, args=(20,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(e, FileExistsError) for e in errors)
    found = ck.best_checkpoint(run, journal)
    assert found is not None and found.position == (0, size)
    assert not [p for p in run.iterdir() if ".tmp" in p.name]


def test_a_full_disk_while_writing_a_checkpoint_keeps_the_old_one(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.system(f"mount -t tmpfs -o size=256k tmpfs {mnt} 2>/dev/null") != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        run, events = _checkpointed_run(mnt, n=200)
        good = RunPaths(run).checkpoint.read_bytes()
        filler = mnt / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        big = RunState()
        for i in range(3000):  # a state whose checkpoint cannot fit in what is left
            big.apply(ev.OutputLine(t=float(i), stream="stdout", text=os.urandom(64).hex()))
        cp = Checkpointer(run, every_events=1)
        writer = JournalWriter(run / "events.jsonl", segment_bytes=None,  # the run's journal, continued
                               continues=FileId.of((run / "events.jsonl").stat()))
        words = cp.after_flush(big, writer)
        assert words is not None and "checkpoint not written" in words and "No space left" in words
        big.apply(ev.Notice(t=1.0, level="info", message="one more"))
        assert cp.after_flush(big, writer) is None  # the same reason is said once
        assert RunPaths(run).checkpoint.read_bytes() == good
        assert not [p for p in run.iterdir() if ".tmp" in p.name]
        writer.close()
        filler.unlink()
        found = ck.best_checkpoint(run, run / "events.jsonl")
        assert found is not None and found.events == 100  # the old one, still whole
    finally:
        os.system(f"umount {mnt}")


# ---------------------------------------------------------------- segments
def _segmented_run(tmp_path: Path, n: int = 3000) -> list[ev.Event]:
    events = _events([(1, 0.05, 0, 1e-3)] * n, [0, 3])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=30_000)
    for e in events:
        writer.write(e)
        writer.flush()
    writer.close()
    assert writer.rotations >= 5
    return events


def test_segments_read_back_as_one_journal(tmp_path):
    events = _segmented_run(tmp_path)
    got, problems = read_journal(tmp_path / "events.jsonl")
    assert problems == [] and got == events
    assert sorted(p.name for p in tmp_path.iterdir())[0] == "events.000000.jsonl.zst"


def test_a_segment_deleted_by_hand_is_said_once_and_the_rest_is_read(tmp_path):
    events = _segmented_run(tmp_path)
    victim = tmp_path / "events.000002.jsonl.zst"
    victim.unlink()
    got, problems = read_journal(tmp_path / "events.jsonl")
    assert len(problems) == 1 and "journal segment 2 (events.000002.jsonl.zst) is missing" in problems[0].error
    assert 0 < len(events) - len(got) < len(events) // 3
    assert got[-1] == events[-1] and got[0] == events[0]
    tail = JournalTail(tmp_path / "events.jsonl")
    followed = []
    while chunk := tail.read_new(max_bytes=10_000):
        followed += chunk
    assert followed == got and [p.error for p in tail.problems] == [problems[0].error]


def test_a_viewer_following_the_journal_reads_every_event_once_across_rotations(tmp_path):
    """The writer rotates (rename, new file, compression) while the tail reads: every event
    arrives once, in order, and the tail ends in the live segment."""
    events = _events([(1, 0.05, 0, 1e-3)] * 4000, [0, 2, 3])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=25_000)
    tail = JournalTail(tmp_path / "events.jsonl")
    got: list[ev.Event] = []
    for i, e in enumerate(events):
        writer.write(e)
        if i % 37 == 0:
            writer.flush()
            got += tail.read_new(max_bytes=4096)
    writer.close()
    while chunk := tail.read_new():
        got += chunk
    assert got == events and tail.problems == []
    assert tail.segment == writer.segment and writer.rotations >= 10 and tail.rotations_seen == writer.rotations


def test_a_viewer_attaching_late_starts_from_the_checkpoint_and_follows_on(tmp_path):
    events = _events([(1, 0.05, 0, 1e-3)] * 2000, [0, 3])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=25_000)
    live = RunState()
    cp = Checkpointer(tmp_path, every_events=500)
    for e in events[:1500]:
        writer.write(e)
        live.apply(e)
        writer.flush()
        cp.after_flush(live, writer)
    state, start = resume(tmp_path, tmp_path / "events.jsonl")
    assert start[0] >= 1 and state.event_count >= 1000
    tail = JournalTail(tmp_path / "events.jsonl", start)
    for e in events[1500:]:
        writer.write(e)
    writer.close()
    while chunk := tail.read_new(max_bytes=8192):
        for e in chunk:
            state.apply(e)
    expect = RunState()
    for e in events:
        expect.apply(e)
    assert canon(state) == canon(expect)


@pytest.mark.slow  # seconds of waiting: make test runs it, make test-fast does not
def test_replay_until_starts_from_a_checkpoint_before_that_time_and_equals_the_full_replay(tmp_path):
    events = _events([(1, 0.05, 0, 1e-3)] * 3000, [0, 3])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=25_000)
    live = RunState()
    cp = Checkpointer(tmp_path, every_events=400)
    for e in events:
        writer.write(e)
        live.apply(e)
        writer.flush()
        cp.after_flush(live, writer)
    writer.close()
    until = 60.0  # about step 1200 of 3000, at 50 ms a step
    fast = ReplaySource(tmp_path, speed=0, until=until)
    assert 0 < fast.state.event_count < 2 * 1200  # started from a checkpoint before `until`
    fast.poll(max_events=10**9)
    expect = RunState()
    for e in events:
        if e.t > events[0].t + until:
            break
        expect.apply(e)
    assert canon(fast.state) == canon(expect)
    assert fast.state.event_count == expect.event_count


def test_a_second_recorder_for_the_same_folder_is_refused_in_one_line_and_touches_nothing(tmp_path):
    from neurondesk.recorder.options import RunOptions
    from neurondesk.recorder.recorder import Recorder
    from neurondesk.store.liveness import RecorderLock

    run, _ = _checkpointed_run(tmp_path)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    first = RecorderLock(run)  # the recorder that owns the folder
    try:
        second = Recorder(["python", "train.py"], RunOptions(telemetry=False, run_root=tmp_path / "root"), RunPaths(run))
        with pytest.raises(RuntimeError) as err:
            second.start()
        assert "another recorder owns" in str(err.value) and "\n" not in str(err.value)
    finally:
        first.release()
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != "recorder.lock"}
    assert after == {k: v for k, v in before.items() if k != "recorder.lock"}
    assert ck.best_checkpoint(run, run / "events.jsonl") is not None


@pytest.mark.slow  # seconds of pure work: `make test` runs it, `make test-fast` does not
def test_per_segment_checkpoints_are_thinned_to_a_bounded_number_and_replay_until_still_uses_one(tmp_path):
    from neurondesk.recorder.checkpointing import SEGMENT_KEEP

    events = _events([(1, 0.05, 0, 1e-3)] * 6000, [0])
    writer = JournalWriter(tmp_path / "events.jsonl", segment_bytes=4_000)
    live = RunState()
    cp = Checkpointer(tmp_path, every_events=10**9)
    for e in events:
        writer.write(e)
        live.apply(e)
        writer.flush()
        cp.after_flush(live, writer)
    writer.close()
    kept = sorted(int(p.name[11:-4]) for p in ck.checkpoint_files(tmp_path)[1:])
    assert writer.rotations > 4 * SEGMENT_KEEP and len(kept) <= SEGMENT_KEEP
    assert kept[-1] == writer.segment and 0 in kept  # the newest, and the spread back to the start
    fast = ReplaySource(tmp_path, speed=0, until=150.0)
    assert fast.state.event_count > 0
    fast.poll(max_events=10**9)
    expect = RunState()
    for e in events:
        if e.t > events[0].t + 150.0:
            break
        expect.apply(e)
    assert canon(fast.state) == canon(expect)


def test_ls_reads_a_run_from_its_checkpoint_and_never_a_whole_long_journal(tmp_path, monkeypatch):
    from neurondesk.sources import listing as checkpointing

    run, events = _checkpointed_run(tmp_path, n=400)  # checkpoint after 200 of 400 steps
    full_state = full(run / "events.jsonl")
    row = checkpointing.listing(run, now=events[-1].t + 5)
    assert row.step == full_state.steps_done and row.command == ["python", "train.py"]  # checkpoint + tail
    assert row.elapsed_s == full_state.elapsed_s(events[-1].t + 5) and row.phase == "finished (exit 0)"
    # the checkpoint written by other reducers (another version): a long journal is not reduced,
    # the row its header keeps is shown, as of its time
    RunPaths(run).segment_checkpoint(0).unlink()
    path = RunPaths(run).checkpoint
    data = path.read_bytes()
    at = _payload_at(path)
    header = json.loads(data[len(ck.MAGIC):at])
    header["reducers"] = "0" * 32
    path.write_bytes(ck.MAGIC + json.dumps(header).encode() + b"\n" + data[at:])
    monkeypatch.setattr(checkpointing, "LISTING_FULL_BYTES", 1000)
    row = checkpointing.listing(run, now=events[-1].t + 5)
    assert row.step == header["listing"]["steps_done"] < full_state.steps_done
    assert "(as of " in row.phase
    # a small journal is reduced whole instead: the exact row
    monkeypatch.setattr(checkpointing, "LISTING_FULL_BYTES", 10**9)
    assert checkpointing.listing(run, now=events[-1].t + 5).step == full_state.steps_done


def test_attach_says_once_why_a_checkpoint_was_not_used_and_shows_the_whole_run(tmp_path):
    from neurondesk.sources.follow import FollowSource

    run, events = _checkpointed_run(tmp_path)
    RunPaths(run).segment_checkpoint(0).unlink()
    RunPaths(run).checkpoint.write_bytes(b"garbage")
    source = FollowSource(run, attached=True)
    try:
        assert len(source.notes) == 1 and "not a neurondesk checkpoint" in source.notes[0]
        source.poll()
        assert canon(source.state) == canon(full(run / "events.jsonl"))
    finally:
        source.close()
