"""Two runs of one job on one node started at once (issue 53 item 12): their lifetimes overlap, so they are
concurrent runs, not a relaunch: no restart, no steps lost, and the node's seconds counted once (it said
"1 restart, 200 steps lost" and 18.8 node-seconds for 9.4 s of wall time). Real `neurondesk run`s, merged by
`neurondesk job summary`; the same node run twice one after the other stays a relaunch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, base_env

from neurondesk.sources.job_runs import concurrent_share

WORKLOAD = DATA / "workloads" / "job_node.py"


def test_the_share_of_overlapping_spans_is_the_time_covered_over_their_sum():
    assert concurrent_share([(0.0, 10.0), (10.0, 20.0)]) is None  # one after the other: a relaunch
    assert concurrent_share([(0.0, 10.0), (0.0, 10.0)]) == pytest.approx(0.5)  # at once: half each
    assert concurrent_share([(0.0, 10.0), (5.0, 15.0), (30.0, 40.0)]) == pytest.approx(25.0 / 30.0)


def _run(tmp, folder, env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--job", "j-twice", "--node",
                             "n0", "--price-per-hour", "10", "--run-dir", str(folder), "--", sys.executable,
                             str(WORKLOAD)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _job(tmp, *folders) -> tuple[dict, str]:
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "job", "summary", *map(str, folders), "--format",
                        "json"], capture_output=True, text=True, cwd=REPO, env=base_env(tmp), timeout=REAL_RUN_TIMEOUT_S)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def test_two_runs_of_one_job_started_at_once_are_concurrent_not_a_relaunch(tmp_path):
    env = base_env(tmp_path) | {"STEPS": "60", "SLEEP": "0.05"}
    a, b = tmp_path / "a", tmp_path / "b"
    procs = [_run(tmp_path, a, env), _run(tmp_path, b, env)]  # started at once
    for p in procs:
        _, err = p.communicate(timeout=REAL_RUN_TIMEOUT_S)
        assert p.returncode == 0, err[-2000:]
    out, notes = _job(tmp_path, a, b)
    g = out["goodput"]
    assert (g["restarts"], g["relaunches"], g["steps_lost"]) == (0, 0, 0), g
    spans = [(n["started_t"], n["started_t"] + n["elapsed_s"]) for n in out["nodes"]]
    assert len(spans) == 2 and max(s for s, _ in spans) < min(e for _, e in spans)  # they did overlap
    covered = max(e for _, e in spans) - min(s for s, _ in spans)
    assert g["wall_s"] == pytest.approx(covered, abs=0.01)  # the node's seconds once, not each run's summed
    assert g["productive_s"] + sum(g["badput"].values()) == pytest.approx(g["wall_s"], abs=0.05)
    assert "whose lifetimes overlap: concurrent runs, not relaunches" in notes
    # one after the other, the same node and job: a relaunch, as before
    c = tmp_path / "c"
    p = _run(tmp_path, c, env)
    _, err = p.communicate(timeout=REAL_RUN_TIMEOUT_S)
    assert p.returncode == 0, err[-2000:]
    out, notes = _job(tmp_path, a, c)
    assert (out["goodput"]["relaunches"], out["goodput"]["restarts"]) == (1, 1) and "relaunches of the job" in notes
