"""Issue 24 items 9 and 10: a run's index row is never lost to a lock or to its recorder's death.

Real processes: the index is locked by a second process (a real SQLite write lock, BEGIN
EXCLUSIVE, held until the test lets it go); recorders are killed with a real SIGKILL; `neurondesk
ls` and `history` are real CLI runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from conftest import REPO, base_env, wait_until

from neurondesk.sources.follow import FollowSource
from neurondesk.store.index import RunIndex
from neurondesk.store.liveness import read_recorder_info, recorder_alive

ND = [sys.executable, "-m", "neurondesk.cli"]
WAITER = "import os, sys, time\nprint('up', flush=True)\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"
LOCKER = """
import os, sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
conn.execute("COMMIT")
"""


def _nd(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ND, *args], capture_output=True, text=True, env=base_env(tmp), cwd=REPO, timeout=180)


def _index(tmp: Path) -> Path:
    return tmp / "runs" / "runs.sqlite"


def _ids(tmp: Path) -> list[str]:
    return [r.id for r in RunIndex(_index(tmp)).list_runs()]


def _registry(tmp: Path) -> list[str]:
    live = tmp / "live"
    return sorted(p.name for p in live.iterdir() if p.suffix == ".json") if live.is_dir() else []


@contextmanager
def _index_locked(tmp: Path):
    """The run index held under a real SQLite write lock by a second process until the block ends."""
    RunIndex(_index(tmp))  # made, with its schema
    release = tmp / "release"
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(_index(tmp)), str(release)],
                              stdout=subprocess.PIPE, text=True)
    assert locker.stdout.readline().strip() == "locked"
    try:
        yield
    finally:
        release.touch()
        locker.wait(timeout=60)


def _run_hi(tmp: Path, run_dir: Path) -> subprocess.CompletedProcess:
    return _nd(tmp, "run", "--headless", "--run-dir", str(run_dir), "--", sys.executable, "-c", "print('hi')")


def _run_id(run_dir: Path) -> str:
    return json.loads((run_dir / "summary.json").read_text())["run_id"]


def test_a_run_ending_while_the_index_is_locked_finishes_at_once_and_its_recorder_writes_the_row_later(tmp_path):
    run_dir = tmp_path / "run"
    with _index_locked(tmp_path):
        p = _run_hi(tmp_path, run_dir)
        # `run` came back while the lock is still held: the run was not kept "running" for it
        assert p.returncode == 0, p.stderr
        assert "run index not updated" not in p.stderr
        run_id = _run_id(run_dir)
        assert run_id not in _ids(tmp_path)
        listed = _nd(tmp_path, "ls")
        assert run_id in listed.stdout and "not in the run index yet" in listed.stdout, listed.stdout
        history = _nd(tmp_path, "history")
        assert run_id in history.stdout, history.stdout
        assert _registry(tmp_path), "the entry that says a row is missing was removed"
    wait_until(lambda: run_id in _ids(tmp_path), 60, "the recorder to write the row once the lock freed")
    wait_until(lambda: not _registry(tmp_path), 60, "the recorder to leave the registry")


def test_the_next_ls_writes_the_row_a_recorder_gave_up_on(tmp_path):
    run_dir = tmp_path / "run"
    with _index_locked(tmp_path):
        p = _run_hi(tmp_path, run_dir)
        assert p.returncode == 0, p.stderr
        info = read_recorder_info(run_dir)
        try:
            os.kill(info.pid, signal.SIGKILL)  # the recorder, still waiting for the lock, is gone
        except ProcessLookupError:
            pass
    run_id = _run_id(run_dir)
    if run_id not in _ids(tmp_path):  # (unless the recorder wrote it between the release and the kill)
        listed = _nd(tmp_path, "ls")
        assert listed.returncode == 0, listed.stderr
    assert run_id in _ids(tmp_path)
    assert not _registry(tmp_path)
    assert "not in the run index yet" not in _nd(tmp_path, "ls").stdout


def test_a_run_whose_recorder_was_killed_is_listed_as_lost_and_billed_to_its_last_recorded_time(tmp_path):
    stop = tmp_path / "stop"
    out = _nd(tmp_path, "run", "--detach", "--price-per-hour", "3600", "--", sys.executable, "-c", WAITER, str(stop))
    assert out.returncode == 0, out.stderr
    run_dir = Path(out.stdout.strip())
    try:
        info = wait_until(lambda: (i := read_recorder_info(run_dir)) and i.workload_pid and i, 60, "recorder.json")
        wait_until(lambda: b'"kind":"output"' in (run_dir / "events.jsonl").read_bytes(), 60, "the workload's first line")
        os.kill(info.pid, signal.SIGKILL)
        wait_until(lambda: not recorder_alive(run_dir), 30, "the recorder to die")
        listed = _nd(tmp_path, "ls")
        assert listed.returncode == 0, listed.stderr
        lost_lines = [line for line in listed.stdout.splitlines() if "recorder lost at" in line]
        assert len(lost_lines) == 1 and f"workload pid {info.workload_pid} still running" in lost_lines[0], listed.stdout
        assert run_dir.name in _ids(tmp_path)  # listed after `ls` too, without reindex
        assert not _registry(tmp_path)

        source = FollowSource(run_dir, attached=True)  # what `attach` shows of it
        wait_until(lambda: source.poll() is not None and source.recorder_lost, 30, "the viewer to see the loss")
        assert source.now() == source.state.last_t  # the clock stops where the recording did
        row = RunIndex(_index(tmp_path)).list_runs()[0]
        billed = row.summary.cost.total_usd
        assert billed is not None and abs(billed - row.summary.elapsed_s) < 1.0  # $3600/h: a dollar a second, to the last event
        time.sleep(3)  # three more dollars if anything billed it up to now
        attach = _nd(tmp_path, "attach", run_dir.name)  # not a terminal: the headless view
        amounts = [float(a.replace(",", "")) for a in re.findall(r"\$([0-9][0-9,]*\.[0-9]+)(?![0-9]*/h)", attach.stdout + attach.stderr)]
        assert amounts and max(amounts) <= billed + 0.5, (billed, amounts, attach.stdout[-1500:], attach.stderr[-1500:])
    finally:
        stop.touch()
    wait_until(lambda: "exited" in _nd(tmp_path, "ls").stdout, 60, "ls to say the workload exited")
    history = _nd(tmp_path, "history")
    assert any(run_dir.name in line and "lost" in line for line in history.stdout.splitlines()), history.stdout
