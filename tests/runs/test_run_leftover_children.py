"""A workload that exits leaving a child that holds its output: the run ends (and is billed) when
the main process exits, the child's late output is still taken in, and the summary names it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from conftest import REPO, neurondesk_run

LEAVES_A_CHILD = REPO / "tests" / "data" / "workloads" / "leaves_a_child.py"


def test_run_ends_at_the_main_exit_and_names_the_child_left_running(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = neurondesk_run(tmp_path, [str(pid_file)], timeout=60, workload=LEAVES_A_CHILD)
    child = int(pid_file.read_text())
    try:
        assert run.returncode == 0, run.stderr
        os.kill(child, 0)  # neurondesk neither waited for the child nor killed it
        events = run.events
        finished = next(e for e in events if e["kind"] == "run_finished")
        late = next(e for e in events if e["kind"] == "output" and "late line from the child" in e["text"])
        started = next(e for e in events if e["kind"] == "run_started")
        assert late["t"] > finished["t"]  # taken in after the exit ...
        summary = run.summary
        assert summary["elapsed_s"] < late["t"] - started["t"]  # ... and not billed
        assert [p["pid"] for p in summary["left_running"]] == [child]
        assert "-c" in summary["left_running"][0]["command"]
        assert any(f"pid {child}" in n and "left it running" in n for n in summary["notices"])
        assert f"pid {child}" in Path(run.run_dir / "summary.md").read_text()
    finally:
        os.kill(child, signal.SIGKILL)
