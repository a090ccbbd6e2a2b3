"""Issue 24 item 11: a second `run` into a folder a live recorder owns says so, whatever the timing.

Real processes: a detached run holds the folder; a second `neurondesk run` with the same --run-dir
(with and without --force) is refused before anything runs, naming the owner, and the first run's
files are untouched. The race (both launched before either held the lock) is reproduced by holding
the lock from this test and starting a real recorder process on the folder."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, base_env, wait_until

from neurondesk.store.liveness import LOCK_TAKEN_EXIT, recorder_alive

ND = [sys.executable, "-m", "neurondesk.cli"]
# sleeps until its stop file exists: the test ends it, whatever fails
WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


def test_a_second_run_into_a_live_runs_folder_is_refused_naming_its_recorder(tmp_path):
    run_dir, stop = tmp_path / "shared-run", tmp_path / "stop"
    env = base_env(tmp_path)
    first = subprocess.run([*ND, "run", "--detach", "--run-dir", str(run_dir), "--", sys.executable, "-c",
                            WAITER, str(stop)], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert first.returncode == 0, first.stderr
    try:
        wait_until(lambda: (run_dir / "recorder.json").exists(), 60, "the first recorder's recorder.json")
        owner_pid = json.loads((run_dir / "recorder.json").read_text())["pid"]
        journal_before = (run_dir / "events.jsonl").read_bytes()
        for extra in ([], ["--force"]):  # --force moves a finished run aside, never a live one
            second = subprocess.run([*ND, "run", "--headless", "--run-dir", str(run_dir), *extra, "--",
                                     sys.executable, "-c", "print('second')"],
                                    capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
            assert second.returncode == 2, second.stderr
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1, second.stderr
            assert "another recorder" in lines[0] and f"pid {owner_pid}" in lines[0], lines[0]
            assert "may still" not in lines[0] and "second" not in second.stdout
        assert recorder_alive(run_dir)
        assert not list(run_dir.glob("previous-*")), "a live run's files were moved aside"
        assert (run_dir / "events.jsonl").read_bytes().startswith(journal_before)
    finally:
        stop.touch()
        wait_until(lambda: not recorder_alive(run_dir), 60, "the first recorder to finish")
    assert json.loads((run_dir / "summary.json").read_text())["exit_code"] == 0


def test_a_recorder_that_loses_the_race_for_its_folder_says_why_and_exits_apart(tmp_path):
    """Both launched at once: the one that does not get the lock writes the cause into its log
    (recorder.log, its stderr) and exits with its own status; it journals nothing."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    lock_fd = os.open(run_dir / "recorder.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # "the first recorder"
    os.write(lock_fd, f"{os.getpid()}\n".encode())
    try:
        from neurondesk.recorder.options import LaunchSpec, RunOptions, encode_spec

        spec = LaunchSpec([sys.executable, "-c", "print('never')"], run_dir, RunOptions(env=base_env(tmp_path)))
        p = subprocess.run([sys.executable, "-m", "neurondesk.recorder"], input=encode_spec(spec).decode(),
                           capture_output=True, text=True, env=base_env(tmp_path), cwd=REPO, timeout=120)
    finally:
        os.close(lock_fd)
    assert p.returncode == LOCK_TAKEN_EXIT, p.stderr
    assert f"another recorder owns {run_dir} (recorder pid {os.getpid()})" in p.stderr, p.stderr
    assert not (run_dir / "events.jsonl").exists()


def test_the_launcher_does_not_take_another_recorders_journal_for_its_own(tmp_path):
    """The race seen from `run`: the folder's journal exists (the winner's) when the loser starts;
    the launcher waits for its own recorder, which exits with the cause, and says it."""
    from neurondesk.recorder.options import LaunchSpec, RunOptions, encode_spec
    from neurondesk.sources.launch import LaunchError, _wait_ready
    from neurondesk.store.rundir import RunPaths

    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    (run_dir / "events.jsonl").write_text('{"kind":"run_started"}\n')  # the winner's first event
    lock_fd = os.open(run_dir / "recorder.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(lock_fd, f"{os.getpid()}\n".encode())
    log_fd = os.open(run_dir / "recorder.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    spec = LaunchSpec(["true"], run_dir, RunOptions(env=base_env(tmp_path)))
    try:
        proc = subprocess.Popen([sys.executable, "-m", "neurondesk.recorder"], stdin=subprocess.PIPE,
                                stdout=log_fd, stderr=log_fd, env=base_env(tmp_path), cwd=REPO)
        proc.stdin.write(encode_spec(spec))
        proc.stdin.close()
        try:
            _wait_ready(RunPaths(Path(run_dir)), proc)
            raise AssertionError("the launcher took the other recorder's journal for its own")
        except LaunchError as exc:
            message = str(exc)
        proc.wait(timeout=60)
    finally:
        os.close(lock_fd)
        os.close(log_fd)
    assert "did not start" in message and f"(recorder pid {os.getpid()})" in message, message
