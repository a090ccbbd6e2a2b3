"""The probe follows the process tree: training in children of the launched process (torchrun)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import neurondesk_run

TORCHRUN = Path(sys.executable).parent / "torchrun"


@pytest.mark.skipif(not TORCHRUN.exists() and shutil.which("torchrun") is None,
                    reason="torchrun comes with torch; `make test` installs it")
def test_torchrun_workers_are_followed_and_counted_as_ranks(tmp_path):
    run = neurondesk_run(tmp_path, ["--standalone", "--nproc_per_node", "2", "workloads/train.py", "--preset", "demo",
                                    "--device", "cpu", "--steps", "12"], workload=TORCHRUN)
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    ranks = sorted(e["rank"] for e in run.events if e["kind"] == "process_attached")
    assert ranks == [0, 1]  # the torchrun launcher itself trains nothing and stays silent
    assert s["world_size"] == 2 and s["steps"] == 12
    step_pids = {e["pid"] for e in run.events if e["kind"] == "step"}
    worker_pids = {e["pid"] for e in run.events if e["kind"] == "process_attached"}
    assert step_pids == worker_pids and len(step_pids) == 2
    assert s["steady"]["steps"] == 12 - 5
