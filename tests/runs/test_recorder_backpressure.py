"""No step is dropped silently: the recorder stalls (SIGSTOP, as a starved or swapped-out process
would) while a workload runs thousands of steps a second; the probe drops what it cannot send,
says so when it can write again, and the step count comes out right anyway."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, base_env
from test_recorder_lifecycle import ND, finished_summary, steps_journaled, wait_until

from neurondesk.store.liveness import read_recorder_info

FAST = REPO / "tests" / "data" / "workloads" / "fast_steps.py"


def steps_printed(run_dir: Path) -> int:
    lines = [line for line in (run_dir / "stdout.log").read_text().splitlines() if line.startswith("fast_steps at ")]
    return int(lines[-1].split()[-1]) if lines else 0


def test_a_stalled_recorder_loses_step_events_and_says_so_but_counts_every_step(tmp_path):
    release = tmp_path / "release"
    out = subprocess.run([*ND, "run", "--detach", "--price-per-hour", "1", "--", sys.executable, str(FAST),
                          str(release)], capture_output=True, text=True, env=base_env(tmp_path), cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    run_dir = Path(out.stdout.strip())
    recorder = None
    try:  # whatever fails, the workload is released: it steps until told to stop
        wait_until(lambda: steps_journaled(run_dir) >= 1000, 120, "a thousand steps")
        recorder = read_recorder_info(run_dir).pid
        at_stall = steps_printed(run_dir)
        os.kill(recorder, signal.SIGSTOP)
        # the stall: the workload steps on while the socket and the probe's backlog (20,000
        # messages) fill up; at least 4 s, and until it has run 50,000 steps more, however slow
        time.sleep(4)
        wait_until(lambda: steps_printed(run_dir) >= at_stall + 50_000, 300, "50,000 steps during the stall")
    finally:
        if recorder is not None:
            os.kill(recorder, signal.SIGCONT)
        release.touch()
    summary = finished_summary(run_dir)
    ran = int((run_dir / "stdout.log").read_text().split("fast_steps ran ")[1].split()[0])
    assert summary["exit_code"] == 0
    assert summary["steps_lost"] >= 50_000 - 20_000 - 10_000  # the stall's steps, less backlog and socket
    assert summary["steps"] == ran  # corrected from the probe's own counter
    assert steps_journaled(run_dir) == ran - summary["steps_lost"]
    assert any("step" in n and "lost" in n for n in summary["notices"]), summary["notices"]
    kinds = [json.loads(line)["kind"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert "probe_dropped" in kinds
