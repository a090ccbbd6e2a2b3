"""Many ranks: real `torchrun` jobs of the bundled workload (DDP over gloo on this CPU, or XLA ranks
each training alone), and the rank reducer on synthetic streams where the answer is known."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from conftest import REAL_RUN_TIMEOUT_S, REPO, Run, base_env

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary

WORKLOADS = REPO / "workloads"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def torchrun_job(tmp_path, nproc: int, *train_args: str, device: str = "cpu") -> Run:
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--",
           *TORCHRUN, "--standalone", "--nproc_per_node", str(nproc), str(WORKLOADS / "train.py"), "--preset", "demo",
           "--device", device, *train_args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path),
                       cwd=WORKLOADS)
    return Run(p.returncode, p.stdout, p.stderr, run_dir)


# ---------------------------------------------------------------- real jobs
@pytest.mark.parametrize(("kind", "rank"), [("compute", 2), ("data", 1)])
def test_a_straggling_rank_is_named_with_its_cause(tmp_path, kind, rank):
    run = torchrun_job(tmp_path, 4, "--steps", "30", "--straggler-rank", str(rank), "--straggler-ms", "40",
                       "--straggler-kind", kind)
    assert run.returncode == 0, run.stderr[-3000:]
    s = run.summary
    assert (s["world_size"], s["steps"]) == (4, 30)
    assert [(x["rank"], x["cause"]) for x in s["stragglers"]] == [(rank, kind)]
    assert s["stragglers"][0]["vs_median_s"] > 0.02  # about the 40 ms it was given
    assert sorted(r["rank"] for r in s["ranks"]) == [0, 1, 2, 3]
    # the job's step is every rank's samples a step, summed (not the lead's x world), at the job's step time
    per_step = sum(r["samples_per_s"] * r["mean_step_s"] for r in s["ranks"])  # each rank's rate on the one basis
    assert s["steady"]["samples_per_s"] * s["steady"]["step_time_s"] == pytest.approx(per_step, rel=1e-3)
    assert f"straggler: rank {rank}" in run.stderr


# ---------------------------------------------------------------- the reducer, synthetic
def job(presync_ms: dict[int, float], steps: int = 40, noise_ms: float = 3.0, wait_ms: dict | None = None,
        seed: int = 1) -> RunState:
    rng = random.Random(seed)
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["torchrun"], warmup_steps=5))
    for rank in presync_ms:
        st.apply(ev.ProcessAttached(t=0.1, pid=100 + rank, rank=rank, local_rank=rank))
    for i in range(steps):
        for rank, base in presync_ms.items():
            wait = (wait_ms or {}).get(rank, 0.0) / 1000
            pre = (base + rng.uniform(-noise_ms, noise_ms)) / 1000 + wait
            st.apply(ev.StepEnded(t=1.0 + i, pid=100 + rank, step=i, duration_s=0.1, samples=8,
                                  data_wait_s=wait, presync_s=pre))
    return st


def test_noise_of_a_busy_machine_is_no_straggler_but_a_consistent_lag_is():
    assert job({0: 45, 1: 45, 2: 45, 3: 45}, noise_ms=8).parts.ranks.stragglers() == []
    (s,) = job({0: 45, 1: 45, 2: 60, 3: 45}).parts.ranks.stragglers()
    assert (s.rank, s.cause) == (2, "compute") and 0.012 < s.vs_median_s < 0.018
    (d,) = job({0: 45, 1: 45, 2: 45, 3: 45}, wait_ms={3: 20}).parts.ranks.stragglers()
    assert (d.rank, d.cause) == (3, "data")


def test_job_figures_sum_the_ranks_and_a_step_is_done_when_every_rank_ended_it():
    st = job({0: 45, 1: 45})
    st.apply(ev.StepEnded(t=99.0, pid=100, step=40, duration_s=0.1, samples=8, presync_s=0.045))
    summary = run_summary(st).as_dict()
    assert summary["steps"] == 40  # rank 1 has not ended step 40 yet
    assert summary["steady"]["samples_per_s"] == pytest.approx(2 * 8 / 0.1)
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]


def test_each_rank_gets_the_neuroncores_its_process_owns_from_neuron_monitor_fixture_shaped_samples():
    from neurondesk.core.events import device_events as dev

    st = job({0: 45, 1: 45}, steps=8)
    st.apply(dev.NeuronSample(t=50.0, raw="{}", cores=[
        dev.NeuronCoreSample(core=0, utilization=80.0, owner_pid=100),
        dev.NeuronCoreSample(core=1, utilization=60.0, owner_pid=100),
        dev.NeuronCoreSample(core=2, utilization=10.0, owner_pid=101),
        dev.NeuronCoreSample(core=3, utilization=None, owner_pid=None)]))
    rows = {r["rank"]: r for r in run_summary(st).as_dict()["ranks"]}
    assert (rows[0]["neuron_cores"], rows[0]["neuron_utilization"]) == ([0, 1], 70.0)
    assert (rows[1]["neuron_cores"], rows[1]["neuron_utilization"]) == ([2], 10.0)


def test_summary_md_marks_a_graph_every_rank_compiled_and_one_some_ranks_only():
    from neurondesk.reports.summary_writer import to_markdown

    st = job({0: 45, 1: 45}, steps=8)
    for pid, step, shapes in ((100, 2, [[8, 64]]), (101, 2, [[8, 64]]), (101, 6, [[8, 80]])):
        st.apply(ev.CompileFinished(t=60.0 + step, source="probe", pid=pid, step=step, duration_s=1.0,
                                    point="sync@train.py:9", trigger="sync", input_shapes=shapes))
    s = run_summary(st)
    assert s.compile_count == 2 and [c.ranks for c in s.compiles] == [[0, 1], [1]]
    md = to_markdown(s)
    assert "first (× 2 ranks)" in md and "shape-change (rank 1 only)" in md
