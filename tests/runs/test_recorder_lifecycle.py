"""The run outlives its viewers and its recorder: real `neurondesk` processes, a real console in a
pseudo-terminal, real signals. The workload is a small eager-torch loop that prints every step
(so a dead pipe would kill it) and leaves a marker file when it has run to its end."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, base_env

from neurondesk.store.index import RunIndex
from neurondesk.store.liveness import read_recorder_info, recorder_alive

STEPS_PY = REPO / "tests" / "data" / "workloads" / "steps.py"
ND = [sys.executable, "-m", "neurondesk.cli"]


def wait_until(predicate, timeout: float, what: str, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)


def _read_until(pipe, marker: str, timeout: float) -> str:
    """Read a text pipe until ``marker`` shows (the process is up and doing its job)."""
    import select

    seen = ""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        assert time.monotonic() < deadline, f"timed out waiting for {marker!r}: {seen!r}"
        r, _, _ = select.select([pipe], [], [], 0.2)
        if r:
            chunk = os.read(pipe.fileno(), 65536).decode("utf-8", "replace")
            assert chunk, f"the pipe closed before {marker!r}: {seen!r}"
            seen += chunk
    return seen


def journal_kinds(run_dir: Path) -> list[str]:
    try:
        lines = (run_dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    kinds = []
    for line in lines:
        try:
            kinds.append(json.loads(line).get("kind"))  # a segment's first line has none
        except ValueError:
            pass  # the recorder may be half-way through a line
    return kinds


def steps_journaled(run_dir: Path) -> int:
    """Steps in the live journal: a `step` line is one, a coalesced `steps` batch its length."""
    try:
        lines = (run_dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return 0
    n = 0
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue  # the recorder may be half-way through a line
        if e.get("kind") == "step":
            n += 1
        elif e.get("kind") == "steps":
            n += len(e.get("duration_s") or [])
    return n


def workload_cmd(tmp_path: Path, steps: int, sleep_s: float) -> list[str]:
    return [sys.executable, str(STEPS_PY), str(steps), str(sleep_s), str(tmp_path / "marker")]


def detach(tmp_path: Path, steps: int, sleep_s: float, *extra: str) -> Path:
    out = subprocess.run([*ND, "run", "--detach", "--price-per-hour", "2", *extra, "--",
                          *workload_cmd(tmp_path, steps, sleep_s)],
                         capture_output=True, text=True, env=base_env(tmp_path), cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    run_dir = Path(out.stdout.strip())
    assert (run_dir / "events.jsonl").exists()
    return run_dir


def finished_summary(run_dir: Path, timeout: float = 120) -> dict:
    wait_until(lambda: (run_dir / "summary.json").exists() and not recorder_alive(run_dir), timeout,
               "the recorder to write the summary and exit")
    return json.loads((run_dir / "summary.json").read_text())


def indexed_ids(home: Path) -> list[str]:
    return [r.id for r in RunIndex(home / "runs" / "runs.sqlite").list_runs()]


def test_detach_ls_two_attached_viewers_one_detaches_and_the_run_has_every_step(tmp_path):
    steps = 120  # 12 s: long enough that the first viewer detaches while it runs, even on a busy machine
    run_dir = detach(tmp_path, steps, 0.1)
    env = base_env(tmp_path)
    wait_until(lambda: steps_journaled(run_dir) >= 2, 60, "the first steps")

    ls = subprocess.run([*ND, "ls"], capture_output=True, text=True, env=env, cwd=REPO, timeout=30)
    live_line = next(line for line in ls.stdout.splitlines() if line.startswith(run_dir.name))
    assert "steps.py" in live_line and "$" in live_line, ls.stdout

    viewers = [subprocess.Popen([*ND, "attach", "--headless", run_dir.name], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=REPO) for _ in range(2)]
    first = _read_until(viewers[0].stderr, "neurondesk: ", 60)  # its status line: it is watching
    viewers[0].send_signal(signal.SIGINT)  # Ctrl-C in an attached printer detaches
    out0, err0 = viewers[0].communicate(timeout=30)
    err0 = first + err0
    assert viewers[0].returncode == 0 and "detached from" in err0, err0
    assert recorder_alive(run_dir), "detaching must not end the run"

    out1, err1 = viewers[1].communicate(timeout=120)  # the other one follows it to the end
    assert viewers[1].returncode == 0, err1
    assert "training done" in out1 and re.search(rf"^ *steps +{steps}\b", out1, re.M), out1

    summary = finished_summary(run_dir)
    assert summary["steps"] == steps and summary["exit_code"] == 0
    assert (tmp_path / "marker").exists()
    assert run_dir.name in indexed_ids(tmp_path)
    ls = subprocess.run([*ND, "ls"], capture_output=True, text=True, env=env, cwd=REPO, timeout=30)
    assert "no live run" in ls.stdout and run_dir.name in ls.stdout


def test_recorder_killed_training_runs_to_its_end_and_summary_says_where_recording_stopped(tmp_path):
    steps = 30
    run_dir = detach(tmp_path, steps, 0.1)
    wait_until(lambda: steps_journaled(run_dir) >= 3, 60, "three steps")
    info = read_recorder_info(run_dir)
    os.kill(info.pid, signal.SIGKILL)
    wait_until(lambda: not recorder_alive(run_dir), 10, "the recorder to die")

    wait_until(lambda: (tmp_path / "marker").exists(), 60, "the training to finish unrecorded")
    # its last line, printed right after the marker, still reaches its own output file
    wait_until(lambda: (run_dir / "stdout.log").read_text().rstrip().endswith("training done"), 30,
               "the workload's last line in stdout.log")

    out = subprocess.run([*ND, "summary", str(run_dir), "--format", "json"], capture_output=True, text=True,
                         env=base_env(tmp_path), cwd=REPO, timeout=30)
    assert out.returncode == 0, out.stderr
    recorded = json.loads(out.stdout)
    assert 3 <= recorded["steps"] < steps and recorded["finished"] is False
    assert "recording of" in out.stderr and "stopped at" in out.stderr and "missing" in out.stderr
    assert f"pid {info.workload_pid}" in out.stderr
    # The killed recorder could not remove its socket folder; `summary` did, once it was dead.
    assert not os.path.exists(os.path.dirname(info.control_socket))


def _spawn_in_pty(argv: list[str], env: dict, cols: int = 160, rows: int = 48) -> tuple[int, int]:
    import fcntl
    import struct
    import termios

    pid, master = pty.fork()
    if pid == 0:  # the child: its terminal is the pty (a session leader with a controlling tty)
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.chdir(REPO)
        os.execve(argv[0], argv, env)
    return pid, master


def _drain(master: int, until: float) -> bytes:
    import select

    data = b""
    while time.monotonic() < until:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data


def _run_dir_of(home: Path) -> Path:
    runs = home / "runs"
    return wait_until(lambda: next((d for d in runs.iterdir() if d.is_dir()), None) if runs.exists() else None,
                      60, "the run folder")


@pytest.mark.parametrize("how", ["console SIGKILL", "terminal closed (SIGHUP)"])
def test_the_training_outlives_its_console(tmp_path, how):
    steps = 30
    env = base_env(tmp_path)
    env["TERM"] = "xterm-256color"
    argv = [*ND, "run", "--price-per-hour", "2"]
    if how != "console SIGKILL":
        argv.append("--headless")  # the status line in a terminal that then goes away
    pid, master = _spawn_in_pty([*argv, "--", *workload_cmd(tmp_path, steps, 0.1)], env)
    try:
        run_dir = _run_dir_of(tmp_path)
        deadline = time.monotonic() + 90
        while steps_journaled(run_dir) < 3:
            _drain(master, time.monotonic() + 0.2)  # keep the terminal read, as a real one is
            assert time.monotonic() < deadline, "timed out waiting for three steps"
        if how == "console SIGKILL":
            os.kill(pid, signal.SIGKILL)
        else:
            os.close(master)  # the terminal is gone: the kernel hangs up its session
            master = -1
        os.waitpid(pid, 0)
        assert recorder_alive(run_dir)
        summary = finished_summary(run_dir)
    finally:
        if master >= 0:
            os.close(master)
    assert summary["steps"] == steps and summary["exit_code"] == 0, summary
    assert (tmp_path / "marker").exists()
    assert run_dir.name in indexed_ids(tmp_path)


def test_live_summary_equals_the_replayed_journal_notices_included(tmp_path):
    """The recorder's summary (reduced live) and `neurondesk summary` (the journal reduced again)
    are the same document, notices included: here a neuron-monitor stream that cannot be read
    (a real collector failure, restarted with backoff) gives warnings during the run."""
    env = base_env(tmp_path)
    run_dir = tmp_path / "run"
    p = subprocess.run([*ND, "run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(run_dir),
                        "--neuron-monitor-replay", str(tmp_path / "no-such-stream.jsonl"), "--",
                        *workload_cmd(tmp_path, 25, 0.1)], capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    live = json.loads((run_dir / "summary.json").read_text())
    journal_only = tmp_path / "journal-only" / run_dir.name  # without the checkpoints: the events alone
    journal_only.mkdir(parents=True)
    for f in run_dir.glob("events*"):
        shutil.copy(f, journal_only / f.name)
    for folder in (run_dir, journal_only):
        out = subprocess.run([*ND, "summary", str(folder), "--format", "json"], capture_output=True, text=True,
                             env=env, cwd=REPO, timeout=30)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == live
    assert live["steps"] == 25
    assert any("neuron-monitor" in n and "restarting" in n for n in live["notices"]), live["notices"]
    # the viewer's own table (its reduction of the followed journal) is the replayed one too
    text = subprocess.run([*ND, "summary", str(run_dir), "--format", "text"], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=30).stdout
    assert text in p.stdout
