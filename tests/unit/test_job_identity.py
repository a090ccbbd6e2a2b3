"""The job identity (core/events/job_identity.py): from torchrun's and SLURM's variables, the flags winning, the workers'
hellos completing the recorder's environment; exported as series and in summary.json."""

from __future__ import annotations

import re

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.job_identity import LAUNCH_VARS, identify
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.probe.bootstrap import _neurondesk_probe as probe

TORCHRUN = {"TORCHELASTIC_RUN_ID": "job-42", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "4", "RANK": "6",
            "LOCAL_RANK": "2", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "4"}
SLURM = {"SLURM_JOB_ID": "9911", "SLURM_NODEID": "3", "SLURM_NNODES": "8", "SLURM_NTASKS": "8",
         "SLURM_PROCID": "3", "SLURMD_NODENAME": "trn-03"}


def test_probe_sends_the_variables_core_reads():
    assert probe.LAUNCH_VARS == LAUNCH_VARS  # two copies (the probe imports nothing of neurondesk)


def test_torchrun_variables_give_job_node_rank_and_sizes():
    job = identify(TORCHRUN, host="ip-10-0-0-7")
    assert (job.job_id, job.node, job.node_rank, job.nodes, job.world_size, job.local_world_size, job.launcher) == (
        "job-42", "ip-10-0-0-7", 1, 4, 16, 4, "torchrun")
    assert job.sources == {"job_id": "TORCHELASTIC_RUN_ID", "node": "host name", "node_rank": "GROUP_RANK",
                           "nodes": "GROUP_WORLD_SIZE", "world_size": "WORLD_SIZE",
                           "local_world_size": "LOCAL_WORLD_SIZE"}
    assert job.problems == []


def test_torchruns_default_rdzv_id_names_no_job_and_slurm_fills_in():
    job = identify({**SLURM, **TORCHRUN, "TORCHELASTIC_RUN_ID": "none"}, host="h")
    assert job.job_id == "9911" and job.sources["job_id"] == "SLURM_JOB_ID"
    assert job.node == "trn-03" and job.node_rank == 1  # GROUP_RANK before SLURM_NODEID


def test_slurm_alone_and_the_flags_win():
    job = identify(SLURM, host="h")
    assert (job.job_id, job.node, job.node_rank, job.nodes, job.launcher) == ("9911", "trn-03", 3, 8, "slurm")
    flagged = identify(SLURM, host="h", job_flag="mine", node_flag="n7")
    assert (flagged.job_id, flagged.node, flagged.sources["job_id"], flagged.sources["node"]) == (
        "mine", "n7", "--job", "--node")


def test_a_node_rank_out_of_range_is_one_line():
    job = identify({**TORCHRUN, "GROUP_RANK": "4"}, host="h")
    assert len(job.problems) == 1 and re.search(r"node rank 4 is out of range for a job of 4 node", job.problems[0])


def _state(recorder_env: dict, workers: list[dict]) -> RunState:
    s = RunState()
    s.apply(ev.RunStarted(t=1.0, run_id="r1", command=["torchrun"], host="node-a", launch_env=recorder_env))
    for i, env in enumerate(workers):
        s.apply(ev.ProcessAttached(t=2.0, pid=100 + i, rank=int(env["RANK"]), launch_env=env))
    return s


def test_the_workers_hellos_complete_the_recorders_identity_and_disagreements_are_said():
    workers = [{**TORCHRUN, "RANK": "4", "LOCAL_RANK": "0"}, {**TORCHRUN, "RANK": "5", "LOCAL_RANK": "1"}]
    s = _state({}, workers)
    job = s.parts.job.identity()
    assert (job.job_id, job.node_rank, job.ranks) == ("job-42", 1, [4, 5])
    assert run_summary(s).job == job  # summary.json's job section is that identity
    s.apply(ev.ProcessAttached(t=3.0, pid=200, rank=9, launch_env={**TORCHRUN, "RANK": "9", "GROUP_RANK": "2"}))
    job = s.parts.job.identity()
    assert job.node_rank == 1 and any("GROUP_RANK='2'" in p for p in job.problems)
