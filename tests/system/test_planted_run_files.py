"""A file or symlink planted at a run file's path after the folder checks (a race) is never written
through (issue 34 item 10): events.jsonl, the lock file, stdout.log / stderr.log and the fallback
remainder are made by their open (O_CREAT|O_EXCL|O_NOFOLLOW), and where one is opened again it must
be the very file made (its (st_dev, st_ino) compared with fstat). Each refusal is one line naming the
file and what to do; the workload is never harmed: refused before it starts, or (its output file
replaced while it runs) the planted file is moved aside and its output goes on in a new file."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, base_env, wait_until

from neurondesk.core.events import run_events as ev
from neurondesk.recorder.options import RunOptions
from neurondesk.recorder.recorder import Recorder
from neurondesk.sources import launch
from neurondesk.store.journal import JournalError, JournalWriter, read_journal
from neurondesk.store.liveness import RecorderLock
from neurondesk.store.own_files import FileId, NotOurFile
from neurondesk.store.rundir import RunPaths

PRECIOUS = b"precious, not neurondesk's\n"


def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_bytes(PRECIOUS)
    v.chmod(0o600)
    return v


def plant(path: Path, how: str, target: Path) -> None:
    """What another process puts at ``path``: a symlink to ``target``, a regular file of its own,
    or a hard link to ``target`` (0600, so the folder checks' kind of test would pass it)."""
    if how == "symlink":
        path.symlink_to(target)
    elif how == "file":
        path.write_bytes(PRECIOUS)
        path.chmod(0o600)
    else:
        os.link(target, path)


def one_line(words: str, path: Path) -> None:
    assert "\n" not in words and str(path) in words and "refusing" in words and "never written through" in words


# ---------------------------------------------------------------------------- events.jsonl
@pytest.mark.parametrize("how", ["symlink", "file", "hard link"])
def test_a_journal_planted_before_the_writer_opens_it_is_refused(tmp_path, how):
    v = victim(tmp_path)
    path = tmp_path / "events.jsonl"
    plant(path, how, v)
    with pytest.raises(JournalError) as err:
        JournalWriter(path)
    one_line(str(err.value), path)
    assert v.read_bytes() == PRECIOUS and (how == "symlink" or path.read_bytes() == PRECIOUS)


def test_a_journal_continued_must_be_the_file_made_and_a_replaced_live_file_is_never_closed_into_a_segment(tmp_path):
    path = tmp_path / "events.jsonl"
    w = JournalWriter(path)
    w.write(ev.Notice(t=1.0, level="info", message="a"))
    w.close()
    made = w.file_id
    assert made == FileId.of(path.stat())
    os.rename(path, tmp_path / "ours")
    plant(path, "file", victim(tmp_path))  # replaced: the same name, another file
    with pytest.raises(JournalError) as err:
        JournalWriter(path, continues=made)
    one_line(str(err.value), path)
    assert "another file" in str(err.value) and path.read_bytes() == PRECIOUS
    os.replace(tmp_path / "ours", path)
    with JournalWriter(path, continues=made) as again:  # the very file: continued
        again.write(ev.Notice(t=2.0, level="info", message="b"))
    assert [e.message for e in read_journal(path)[0]] == ["a", "b"]

    # rotation: the live file swapped for another one meanwhile is not taken for a closed segment
    run = tmp_path / "rot"
    run.mkdir()
    w = JournalWriter(run / "events.jsonl", segment_bytes=200, flush_interval_s=0)
    w.write(ev.Notice(t=1.0, level="info", message="x" * 50))
    os.rename(run / "events.jsonl", run / "mine")
    plant(run / "events.jsonl", "file", victim(tmp_path))
    for i in range(10):
        w.write(ev.Notice(t=2.0 + i, level="info", message="y" * 50))
    w.close()
    assert w.rotations == 0 and "no longer the journal file this run writes" in (w.rotation_problem or "")
    assert (run / "events.jsonl").read_bytes() == PRECIOUS and not list(run.glob("events.0*"))
    assert len(read_journal(run / "mine")[0]) == 11  # every event in the file it made


# ---------------------------------------------------------------------------- through the launcher: a race
def _launch(tmp_path: Path, monkeypatch, plant_after_check, command=None):
    """launch_recorder with ``plant_after_check(run_dir)`` run right after the folder checks passed."""
    real = launch.make_run_paths

    def checked_then_planted(options):
        paths = real(options)
        plant_after_check(paths.dir)
        return paths
    monkeypatch.setattr(launch, "make_run_paths", checked_then_planted)
    ran = tmp_path / "workload-ran"
    command = command or [sys.executable, "-c", f"open({str(ran)!r}, 'w')"]
    options = RunOptions(run_dir=tmp_path / "run", run_root=tmp_path / "root", telemetry=False, cwd=str(REPO),
                         env=base_env(tmp_path))
    return launch.launch_recorder(command, options), ran


@pytest.mark.parametrize("how", ["symlink", "file"])
def test_a_journal_planted_after_the_folder_check_stops_the_run_before_the_workload(tmp_path, monkeypatch, how):
    v = victim(tmp_path)
    with pytest.raises(launch.LaunchError) as err:
        _launch(tmp_path, monkeypatch, lambda d: plant(d / "events.jsonl", how, v))
    words = str(err.value)
    assert "\n" not in words and f"refusing the event journal {tmp_path / 'run' / 'events.jsonl'}" in words, words
    assert v.read_bytes() == PRECIOUS and not (tmp_path / "workload-ran").exists()
    assert how == "symlink" or (tmp_path / "run" / "events.jsonl").read_bytes() == PRECIOUS


@pytest.mark.parametrize("how", ["symlink", "hard link", "group-readable"])
def test_a_lock_file_planted_after_the_folder_check_is_refused_in_one_line(tmp_path, monkeypatch, how):
    v = victim(tmp_path)

    def planted(d: Path) -> None:
        if how == "group-readable":
            (d / "recorder.lock").write_bytes(PRECIOUS)
            (d / "recorder.lock").chmod(0o640)
        else:
            plant(d / "recorder.lock", how, v)
    with pytest.raises(launch.RunDirRefused) as err:
        _launch(tmp_path, monkeypatch, planted)
    one_line(str(err.value), tmp_path / "run" / "recorder.lock")
    assert v.read_bytes() == PRECIOUS and not (tmp_path / "run" / "events.jsonl").exists()
    assert not (tmp_path / "workload-ran").exists()


def test_a_lock_file_replaced_between_the_launcher_and_the_recorder_is_refused(tmp_path, monkeypatch):
    """The launcher made the lock and named it to the recorder; another file renamed over it since."""
    real = launch.claim_lock_file

    def claimed_then_replaced(d):
        made = real(d)
        other = Path(d) / "other"
        other.write_bytes(PRECIOUS)
        other.chmod(0o600)
        os.rename(other, Path(d) / "recorder.lock")  # a private file of ours: only its inode tells
        return made
    monkeypatch.setattr(launch, "claim_lock_file", claimed_then_replaced)
    with pytest.raises(launch.LaunchError) as err:
        _launch(tmp_path, monkeypatch, lambda d: None)
    words = str(err.value)
    assert "\n" not in words and f"refusing the run folder's lock file {tmp_path / 'run' / 'recorder.lock'}: it " \
        "is another file, not the file neurondesk made" in words, words
    assert (tmp_path / "run" / "recorder.lock").read_bytes() == PRECIOUS  # no pid written into it
    assert not (tmp_path / "workload-ran").exists()
    # in-process, the same: the lock file that is there must be the one expected
    with pytest.raises(NotOurFile):
        RecorderLock(tmp_path / "run", FileId(1, 1))


# ---------------------------------------------------------------------------- stdout.log / stderr.log
@pytest.mark.parametrize("name", ["stdout.log", "stderr.log"])
def test_an_output_file_planted_before_the_workload_starts_is_refused_and_the_workload_not_started(
        tmp_path, monkeypatch, name):
    v = victim(tmp_path)
    launched, ran = _launch(tmp_path, monkeypatch, lambda d: plant(d / name, "symlink", v))
    assert launched.process.wait(timeout=120) is not None
    events, _ = read_journal(launched.paths.events)
    said = [e.message for e in events if isinstance(e, ev.Notice) and e.level == "error"]
    assert any(m.startswith(f"refusing the workload's output file {tmp_path / 'run' / name}: a symbolic link was "
                            "there before neurondesk made it") and "\n" not in m for m in said), said
    assert [e.exit_code for e in events if isinstance(e, ev.RunFinished)] == [127]
    assert v.read_bytes() == PRECIOUS and not ran.exists()


# the workload: one line, then (once the test replaced stdout.log) another, each said in a marker
REPLACED_MID_RUN = """
import sys, time
from pathlib import Path
d = Path(sys.argv[1])
print("before the swap", flush=True)
(d / "first").write_text("")
end = time.monotonic() + 60
while not (d / "go").exists() and time.monotonic() < end:
    time.sleep(0.05)
for i in range(3):
    print(f"after the swap {i}", flush=True)
    time.sleep(0.3)
"""


@pytest.mark.parametrize("how", ["symlink", "file"])
def test_an_output_file_replaced_while_the_workload_runs_is_moved_aside_and_its_output_goes_on(tmp_path, how):
    """A real run: the relay reopens stdout.log for each write; a file or symlink put in its place
    is never written through, it is moved aside (said once, in one line) and the output goes on in
    a new stdout.log: nothing the workload printed is lost, and the workload ends with status 0."""
    v = victim(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
           "--", sys.executable, "-c", REPLACED_MID_RUN, str(work)]
    import subprocess

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=base_env(tmp_path))
    try:
        wait_until(lambda: (work / "first").exists(), 120, "the workload's first line")
        wait_until(lambda: b"before the swap" in (run_dir / "stdout.log").read_bytes(), 30, "the first line stored")
        os.rename(run_dir / "stdout.log", tmp_path / "first-stdout.log")
        plant(run_dir / "stdout.log", how, v)
        time.sleep(0.2)
        (work / "go").write_text("")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert v.read_bytes() == PRECIOUS  # nothing written through the planted file
    aside = [p for p in run_dir.iterdir() if p.name.startswith("stdout.log.not-neurondesk-")]
    assert len(aside) == 1 and (aside[0].is_symlink() if how == "symlink" else aside[0].read_bytes() == PRECIOUS)
    stored = (run_dir / "stdout.log").read_bytes().decode()
    assert all(f"after the swap {i}" in stored for i in range(3)), stored  # the output, not lost
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
    said = [e["message"] for e in events if e["kind"] == "notice" and e["message"].startswith("refusing")]
    assert len(said) == 1 and "\n" not in said[0], said
    assert said[0].startswith(f"refusing {run_dir / 'stdout.log'}: it was "
                              f"{'a symbolic link' if how == 'symlink' else 'another file'}, not the file neurondesk "
                              "made for the workload's stdout, and was never written through; moved aside to "
                              f"{aside[0].name}"), said[0]
    lines = [e.get("text") for e in events if e["kind"] == "output"]
    assert "before the swap" in lines and all(f"after the swap {i}" in lines for i in range(3)), lines


# ---------------------------------------------------------------------------- the fallback remainder
def test_a_remainder_planted_in_the_fallback_folder_is_refused_and_the_journal_goes_to_a_new_one(tmp_path, monkeypatch):
    from neurondesk.recorder import disk_full

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    v = victim(tmp_path)
    real = disk_full.make_fallback_dir
    planted_in: list[Path] = []

    def made_then_planted(run_dir, **kw):
        folder = real(run_dir, **kw)
        if not planted_in:
            planted_in.append(folder)
            plant(folder / "events.remainder.jsonl", "symlink", v)
        return folder
    monkeypatch.setattr(disk_full, "make_fallback_dir", made_then_planted)
    paths = RunPaths(tmp_path / "run")
    paths.dir.mkdir()
    rec = Recorder(["train"], RunOptions(run_root=tmp_path / "home"), paths)
    rec.run_journal.writer = JournalWriter("/dev/full", flush_interval_s=0.0,  # every write: ENOSPC
                                           continues=FileId.of(os.stat("/dev/full")))
    rec.run_journal.disk.max_pending_bytes = 2048
    rec.record(ev.RunStarted(t=1.0, run_id="run", command=["train"], cwd="/", host="h"))
    for i in range(60):
        rec.record(ev.StepEnded(t=2.0 + i, pid=7, step=i, duration_s=0.1))
    writer = rec.run_journal.writer
    assert writer.diverted and writer.path.parent != planted_in[0]  # another folder, not the planted file
    assert v.read_bytes() == PRECIOUS
    said = [e.message for e in rec.state.notices if e.message.startswith("refusing the fallback journal")]
    assert len(said) == 1 and str(planted_in[0] / "events.remainder.jsonl") in said[0] and "\n" not in said[0]
    assert f"the journal goes on in {writer.path.parent}" in said[0]
    writer.close()
    assert len(read_journal(writer.path)[0]) >= 50  # the events kept in memory are all there
