"""The rank that holds a job back, in a stock Lightning DDP fit (tests/data/workloads/lightning_ddp_slow.py:
strategy "ddp" over gloo, launched by torchrun, 2 ranks on one node under one recorder): Lightning makes the
collectives (a broadcast before every training step, `self.log(sync_dist=True)`'s all_reduce, DDP's gradient
all-reduce), and rank 1 takes 3x the others' time a step after its backward (in on_before_optimizer_step, where
gradient clipping or a synchronising log would be).

One node with 2 ranks shows the rank culprit as the job of many nodes names it (core/job/culprit.py, through
`job summary`, the same rule the live job view applies to Prometheus's series; the 2-node set-up is
tests/runs/test_fleet_slow_places.py): rank 1 the culprit, slow after its backward, rank 0 its victim, nothing blamed
on the network; and the victim's wait in Lightning's broadcast before its step is no pre-sync time of its own
(the run named rank 0 a straggler before)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, base_env

pytestmark = pytest.mark.skipif(importlib.util.find_spec("lightning") is None,
                                reason="lightning is not installed; `make test` installs it (workload extra)")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


@pytest.fixture(scope="module")
def slow_rank_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lightning-ddp")
    env = base_env(tmp) | {"OMP_NUM_THREADS": "1", "ND_SLOW_RANK": "1", "ND_SLOW_PLACE": "after-backward",
                           "ND_STEP_S": "0.03", "ND_STEPS": "80"}
    run_dir = tmp / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--price-per-hour",
           "1", "--warmup-steps", "2", "--", TORCHRUN, "--standalone", "--nproc-per-node", "2",
           str(DATA / "workloads" / "lightning_ddp_slow.py")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]

    def job(fmt: str) -> str:
        q = subprocess.run([sys.executable, "-m", "neurondesk.cli", "job", "summary", str(run_dir), "--format", fmt],
                           capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
        assert q.returncode == 0, q.stderr
        return q.stdout

    return p, json.loads(job("json")), job("text")


def test_the_slow_rank_of_a_lightning_ddp_fit_is_the_culprit_and_the_other_its_victim(slow_rank_run):
    _run, j, text = slow_rank_run
    s = j["slowest"]
    assert s is not None, j["ranks"]
    assert (s["rank"], s["node_ranks"], s["measure"], s["place"], s["victims"]) == (1, [1], "own", "after-backward",
                                                                                    1), (s, j["ranks"])
    assert s["own_s"] > 2 * s["median_own_s"]  # 3x: about 90 ms against 30 ms
    assert s["victim_wait_s"] > 0.5 * (s["own_s"] - s["median_own_s"])  # rank 0 waits for it in collectives
    ranks = {r["rank"]: r for r in j["ranks"]}
    assert ranks[0]["wait_s"] > 5 * ranks[1]["wait_s"], ranks
    line = next(x for x in text.splitlines() if x.startswith(f"node {s['node']} (rank 1): "))
    assert "from its backward to the collective" in line and "(1 rank(s)) waits" in line
    assert "network" not in text and "link" not in text


def test_the_victims_wait_in_lightnings_collectives_is_not_its_pre_sync_time(slow_rank_run):
    run, j, _text = slow_rank_run
    # Lightning broadcasts a tensor before each training step: rank 0 waits there for rank 1. That wait
    # is no compute of rank 0's: its pre-sync time stays its own (a few ms), as rank 1's, and no straggler
    # is named on it (before, rank 0 was: "straggler: rank 0 +60 ms before sync (compute)")
    pre = {r["rank"]: r["presync_s"] for r in j["ranks"]}
    assert pre[0] < 0.5 * j["slowest"]["victim_wait_s"], pre
    assert "straggler: rank 0" not in run.stderr
