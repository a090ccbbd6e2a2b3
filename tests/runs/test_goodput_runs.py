"""Goodput on real processes: a torchrun job (2 ranks, DDP over gloo, --max-restarts 1) under `neurondesk run`
whose rank 1 dies once at step 60 (os._exit: no Python error) and resumes from its own torch.save checkpoint
(every 25 steps, so from step 50) to finish 120 steps; and the same job dying on every attempt (for good).
The workload is tests/data/workloads/restarts_once.py; everything else here is the recorder's own account."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys

from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, Run, base_env

from neurondesk.core.figures.goodput import KINDS
from neurondesk.core.reduce.state import RunState
from neurondesk.reports.trace_export import write_trace
from neurondesk.store.journal import read_journal

WORKLOAD = DATA / "workloads" / "restarts_once.py"


def torchrun_job(tmp, *workload_args: str) -> Run:
    run_dir, ckpt = tmp / "run", tmp / "ckpt"
    ckpt.mkdir()
    with socket.socket() as free:  # a static rendezvous on a free port (the c10d one of --standalone
        free.bind(("127.0.0.1", 0))  # can leave a restarted gloo mesh connecting to the old address)
        port = free.getsockname()[1]
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1.5",
           "--run-dir", str(run_dir), "--", sys.executable, "-m", "torch.distributed.run",
           "--master-addr", "127.0.0.1", "--master-port", str(port),
           "--nproc-per-node", "2", "--max-restarts", "1", str(WORKLOAD), "--ckpt", str(ckpt), *workload_args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp), cwd=REPO)
    return Run(p.returncode, p.stdout, p.stderr, run_dir)


def _adds_up(g: dict) -> None:
    assert set(g["badput"]) == set(KINDS)
    assert abs(g["productive_s"] + sum(g["badput"].values()) - g["wall_s"]) < 0.05
    assert set(g["badput_usd"]) == set(KINDS)  # priced: --price-per-hour


def test_a_rank_that_dies_once_and_resumes_from_its_checkpoint_is_a_finished_job_after_1_restart(tmp_path):
    run = torchrun_job(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    said = json.loads(next(line.split(":", 1)[1] for line in run.stdout.splitlines()
                           if line.startswith("restarts-once:")))
    assert said == {**said, "attempt": 1, "start": 50}  # the script's own word: attempt 1 resumed at step 50
    s = run.summary
    g = s["goodput"]
    assert (g["restarts"], g["max_step"], g["ended"]) == (1, 120, "finished after 1 restart")
    assert g["steps_lost"] in (10, 11)  # rank 1 died at 60, the checkpoint said 50
    assert g["badput"]["restart_recovery"] > 0 and g["badput"]["wasted_progress"] > 0
    assert 0 < g["fraction"] < 1 and g["resume_known"]
    _adds_up(g)
    assert (s["steps"], s["world_size"], len(s["ranks"])) == (120, 2, 2)  # the job's, not two attempts' ranks
    assert s["crash"] is None and s["failed_rank"] is None  # recovered: not "died"
    (d,) = g["disruptions"]
    assert (d["attempt"], d["rank"], d["step"], d["steps_lost"]) == (0, 1, 60, g["steps_lost"])
    # the checkpoint saves (rank 0's torch.save at 25 and 50, then 75 and 100 after the restart), seen with
    # no code change: within 30% of what the script measured itself, and the same value in the figures
    saves = [float(line.split(":", 1)[1]) for line in run.stdout.splitlines() if line.startswith("restarts-once-save:")]
    assert len(saves) == 4 == s["figures"]["checkpoint_saves"]
    assert abs(g["badput"]["checkpoint_save"] - sum(saves)) <= 0.3 * sum(saves), (g["badput"], saves)
    assert g["badput"]["checkpoint_save"] == round(s["figures"]["checkpoint_save_s"], 3)
    assert g["badput"]["checkpoint_load"] > 0  # both ranks of attempt 1 read the step-50 checkpoint
    assert "exit code 7" in d["cause"]  # os._exit(7): torchrun's agent said which rank, the cause stays
    err = run.stderr
    assert "neurondesk: goodput" in err and "finished after 1 restart" in err and "died" not in err.split(
        "neurondesk summary")[-1].split("goodput")[0]
    # the trace: both attempts' ranks, the attempts and the recovery as spans
    events, _ = read_journal(run.run_dir / "events.jsonl")
    state = RunState()
    for e in events:
        state.apply(e)
    out = io.StringIO()
    write_trace(state, events, out)
    trace = json.loads(out.getvalue())["traceEvents"]
    spans = {e["name"] for e in trace if e.get("cat") in ("attempt", "recovery")}
    assert spans == {"attempt 0", "attempt 1", "recovery to attempt 1"}
    ranks = {e["args"]["name"] for e in trace if e.get("name") == "process_name" and "attempt" in e["args"]["name"]}
    assert len(ranks) == 4


def test_a_job_that_dies_on_every_attempt_is_said_died_with_its_goodput(tmp_path):
    run = torchrun_job(tmp_path, "--always-die", "--steps", "80")
    assert run.returncode != 0
    s = run.summary
    g = s["goodput"]
    assert (g["restarts"], g["ended"]) == (1, "died after 1 restart")
    assert g["fraction"] is not None and g["fraction"] > 0
    _adds_up(g)
    assert [d["attempt"] for d in g["disruptions"]] == [0, 1]
    assert g["disruptions"][1]["steps_lost"] is None  # nothing came after it
    assert s["crash"] is not None and s["crash"]["rank"] == 1
    assert "died" in run.stderr
