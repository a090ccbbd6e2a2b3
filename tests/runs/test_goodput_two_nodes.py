"""Goodput of a two-node job on loopback: two torchrun launches (`--nnodes 2`, c10d rendezvous, 1 rank a
node, DDP over gloo, `--max-restarts 1`), each under its own `neurondesk run --headless --job J --node trn-0N`.
The rank on trn-01 dies once at step 60 (os._exit) and the job resumes from the step-50 checkpoint both nodes
share (tests/data/workloads/restarts_once.py) to finish 120 steps; `neurondesk job summary` of the two runs
says which node failed and what the restart cost the job.

What makes the restart reliable across two agents on loopback (c10d rendezvous, no --rdzv-conf needed: 8 of 8
runs here finished): when the rank on trn-01 dies, trn-01's agent counts a restart and re-joins the
rendezvous; trn-00's agent counts one too when its own worker's error (the lost gloo peer) reaches it first,
or restarts its workers uncounted when it sees trn-01 waiting first (they say TORCHELASTIC_RESTART_COUNT 0
again: both happen, run to run). So the workers name each attempt's file rendezvous by a count kept in the
rendezvous store (`--shared-generation`), which both nodes agree on, and neurondesk takes the uncounted
restart as the next attempt (core/reduce/attempts.py). trn-00's worker's error can be dated before trn-01's
silent death (dated when torchrun reports it): the job summary lists the restart's cause first.

The rank each node gets is the rendezvous's (ordered by its agents, not --node-rank): the test reads it from
the job summary's nodes.
Costs: 2 recorders, 2 agents, 2 workers at a time, ~25 s.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import DATA, REPO, base_env

WORKLOAD = DATA / "workloads" / "restarts_once.py"
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
JOB = "restart-2n"
RUN_TIMEOUT_S = 300  # ~25 s here; a hung rendezvous ends the test, not the suite


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two_nodes")
    ckpt = tmp / "ckpt"
    ckpt.mkdir()
    rdzv = _free_port()
    procs = []
    for n in (0, 1):
        env = base_env(tmp / f"home{n}") | {"OMP_NUM_THREADS": "1", "RESTARTS_ONCE_DIE": str(n)}
        cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1.5",
               "--job", JOB, "--node", f"trn-{n:02d}", "--run-dir", str(tmp / f"run{n}"), "--",
               TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(n), "--max-restarts", "1",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{rdzv}", "--rdzv-id", JOB,
               str(WORKLOAD), "--ckpt", str(ckpt), "--die-where", "RESTARTS_ONCE_DIE", "--shared-generation"]
        log = open(tmp / f"node{n}.log", "w")  # noqa: SIM115 - the child holds it
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO))
    try:
        codes = [p.wait(timeout=RUN_TIMEOUT_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    logs = "\n".join((tmp / f"node{n}.log").read_text()[-3000:] for n in (0, 1))
    assert codes == [0, 0], logs
    return tmp, logs


def job_summary(tmp) -> dict:
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "job", "summary", tmp / "run0", tmp / "run1",
                        "--format", "json"], capture_output=True, text=True, cwd=REPO, env=base_env(tmp / "home0"),
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_the_job_view_names_the_failed_node_and_what_the_restart_cost(job):
    tmp, logs = job
    out = job_summary(tmp)
    assert out["job_id"] == JOB and sorted(n["node"] for n in out["nodes"]) == ["trn-00", "trn-01"], out["nodes"]
    rank_of = {n["node"]: n["ranks"] for n in out["nodes"]}
    assert sorted(rank_of["trn-00"] + rank_of["trn-01"]) == [0, 1]
    (failed_rank,) = rank_of["trn-01"]
    assert (out["world_size"], out["figures"]["steps"], out["exit_code"]) == (2, 120, 0)
    assert out["first_failure"] is None  # the job finished: nothing died
    g = out["goodput"]
    assert (g["restarts"], g["max_step"], g["relaunches"]) == (1, 120, 0), g
    assert g["steps_lost"] in (10, 11), g  # the rank died at 60, the checkpoint said 50
    assert g["badput"]["restart_recovery"] > 0 and g["badput"]["wasted_progress"] > 0
    assert g["restart_cost_s"] == pytest.approx(g["badput"]["restart_recovery"] + g["badput"]["wasted_progress"],
                                                abs=0.002)
    # the restart's cause first, whichever node's word was dated first; the other node's attempt ended with it
    cause, *others = g["disruptions"]
    assert (cause["node"], cause["with_node"]) == ("trn-01", None), g["disruptions"]
    d = cause["disruption"]
    assert (d["attempt"], d["rank"], d["step"]) == (0, failed_rank, 60) and "exit code 7" in d["cause"]
    assert [(x["node"], x["with_node"]) for x in others] in ([], [("trn-00", "trn-01")]), others
    text = subprocess.run([sys.executable, "-m", "neurondesk.cli", "job", "summary", tmp / "run0", tmp / "run1"],
                          capture_output=True, text=True, cwd=REPO, env=base_env(tmp / "home0"), timeout=120).stdout
    assert f"node trn-01 failed (attempt 0): rank {failed_rank} at step 60: exit code 7" in text, text
    assert "node trn-00 failed" not in text and "1 restart(s) cost the job" in text


def test_each_nodes_summary_says_its_attempts(job):
    tmp, _ = job
    for n in (0, 1):
        s = json.loads((tmp / f"run{n}" / "summary.json").read_text())
        g = s["goodput"]
        assert (s["job"]["node"], s["steps"], s["crash"]) == (f"trn-{n:02d}", 120, None)
        assert (g["restarts"], g["max_step"], g["ended"]) == (1, 120, "finished after 1 restart"), (n, g)
        assert [x["attempt"] for x in g["disruptions"]] == [0] and g["steps_lost"] in (10, 11)
    died = json.loads((tmp / "run1" / "summary.json").read_text())["goodput"]["disruptions"][0]
    assert "exit code 7" in died["cause"]
