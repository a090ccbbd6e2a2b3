"""A slow link, told apart from a slow rank and from a clean job, on simulated recorders (a slow link cannot
be made on loopback: every rank of a loopback job shares one). Each node of a 3-node job (2 ranks a node) is
a recorder's journal written here, the events its probes send (steps with their phases: the collective
among them); the rest is the real path:

- live: each node's journal reduced (sources/rebuild.py, as a replay does), its exporter's metrics rendered
  (exporter/snapshot.py, exporter/endpoint.py's RunCollector, OpenMetrics text), the per-rank series parsed
  as Prometheus keeps them and read by the fleet's Prometheus reader (clients/prometheus_api.FleetReader),
  then the job view (core/job/job_view.py) and its words and JSON (`fleet --once --format json`);
- after the job: the run folders merged into the job summary (`job summary`: sources/job_runs.py,
  core/job/job_summary.py) and its words.

A node whose ranks' collective is long while every rank's own time is the same: "a slow link on that node",
not a slow rank, not compute; one node computing longer: that node the culprit, the others its victims,
nothing on the network; a clean job: neither."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from neurondesk.clients.prometheus_api import RANK_FIGURES, FleetReader, Sample
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import encode_event
from neurondesk.core.job.fleet import FleetRead, FleetRow
from neurondesk.core.job.job_summary import job_summary
from neurondesk.core.job.job_view import job_view
from neurondesk.exporter.endpoint import RunCollector
from neurondesk.exporter.snapshot import Snapshotter
from neurondesk.reports.job_summary_text import findings
from neurondesk.reports.job_text import job_json
from neurondesk.sources.job_runs import gather
from neurondesk.sources.rebuild import state_from_run_dir

JOB, NODES, PER_NODE, STEPS, T0 = "sim-7", 3, 2, 80, 1_800_000_000.0
SLOW = 1  # trn-01


def write_node(folder: Path, node: int, own_s: float, coll_s: float, rng: random.Random) -> Path:
    """One node's journal: its ranks' steps of ``own_s`` own time (forward, backward, optimizer) and
    ``coll_s`` inside collectives, a little noise on each."""
    run = folder / f"trn-{node:02d}"
    run.mkdir(parents=True)
    env = {"SLURM_JOB_ID": JOB, "SLURM_NNODES": str(NODES), "SLURM_NODEID": str(node), "SLURMD_NODENAME":
           f"trn-{node:02d}"}
    events: list[ev.Event] = [ev.RunStarted(t=T0, run_id=f"run-{node}", command=["torchrun", "train.py"],
                                            warmup_steps=2, price_per_hour=21.5, launch_env=env)]
    ranks = [node * PER_NODE + i for i in range(PER_NODE)]
    for i, r in enumerate(ranks):
        events.append(ev.ProcessAttached(t=T0 + 0.5, pid=1000 + r, rank=r, local_rank=i,
                                         world_size=NODES * PER_NODE,
                                         launch_env={"RANK": str(r), "LOCAL_RANK": str(i),
                                                     "WORLD_SIZE": str(NODES * PER_NODE), "GROUP_RANK": str(node),
                                                     "GROUP_WORLD_SIZE": str(NODES)}))
    t = T0 + 1.0
    for step in range(STEPS):
        for r in ranks:
            own, coll = own_s * rng.uniform(0.97, 1.03), coll_s * rng.uniform(0.97, 1.03)
            fwd = own * 0.4
            events.append(ev.StepEnded(t=t, pid=1000 + r, step=step, duration_s=own + coll, samples=8,
                                       data_wait_s=0.0005, presync_s=0.0005 + fwd,
                                       phases_s=[0.0, fwd, own * 0.4, own * 0.2 - 0.0005, 0.0, coll]))
        t += own_s + coll_s
    events.append(ev.RunFinished(t=t, exit_code=0))
    (run / "events.jsonl").write_bytes(b"".join(encode_event(e) for e in events))
    return run


def write_job(tmp: Path, own: dict[int, float], coll: dict[int, float]) -> list[Path]:
    rng = random.Random(7)
    return [write_node(tmp, n, own[n], coll[n], rng) for n in range(NODES)]


def scraped_ranks(run_dir: Path, now: float) -> tuple[FleetRow, list[Sample]]:
    """What Prometheus holds of one node: its recorder's metrics (reduced from its journal, as a replay
    serves them) rendered as OpenMetrics text and parsed back into samples; the node's row."""
    state, problems = state_from_run_dir(run_dir)
    assert not problems
    collector = RunCollector()
    collector.snapshot = Snapshotter().take(state, now)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    samples = [Sample({"__name__": s.name, **s.labels}, s.value, now)
               for family in text_string_to_metric_families(text) for s in family.samples if s.name in RANK_FIGURES]
    job = state.parts.job.identity()
    row = FleetRow(job_id=job.job_id, node=job.node, run_id=state.run_id or "", step=STEPS,
                   node_rank=job.node_rank, nodes=job.nodes, world_size=job.world_size, last_update_t=now)
    return row, samples


def live(runs: list[Path]) -> dict:
    """`fleet --once --format json`'s job object, read from the nodes' series."""
    now = T0 + 60
    read = [scraped_ranks(r, now) for r in runs]
    ranks = FleetReader._ranks([s for _, samples in read for s in samples])  # the reader's own parse of the series
    assert len(ranks) == NODES * PER_NODE and all(k.own_s is not None for k in ranks), ranks
    return job_json(job_view(FleetRead([row for row, _ in read], ranks, now), JOB))


def summary_lines(runs: list[Path]) -> tuple[object, list[str]]:
    job = job_summary(gather(runs).runs)
    return job, findings(job)


@pytest.mark.parametrize("measured", ["live", "summary"])
def test_a_node_whose_collectives_are_slow_for_each_of_its_ranks_is_a_slow_link_not_a_slow_rank(tmp_path, measured):
    # every rank computes 20 ms a step; trn-01's ranks spend 60 ms a step inside collectives, the others 25 ms
    runs = write_job(tmp_path, own={0: 0.020, 1: 0.020, 2: 0.020}, coll={0: 0.025, 1: 0.060, 2: 0.025})
    if measured == "live":
        j = live(runs)
        assert j["culprit"] is None and j["slowest_node"] is None, j["lines"]
        c, lines = j["slow_collective"], j["lines"]
        assert c["node"] == "trn-01" and c["node_wait_s"] > 2 * c["others_wait_s"], c
    else:
        job, lines = summary_lines(runs)
        assert job.slowest is None and job.slow_collective is not None, lines
        assert job.slow_collective.node == "trn-01", job.slow_collective
    line = next(x for x in lines if x.startswith("no rank is slower than the others"))
    assert "the slow place is inside the collective, on trn-01's link" in line, line
    assert "own time 20 ms a step" in line and "the network (EFA)" not in line
    assert not any("own time a step vs" in x for x in lines)  # no rank named
    assert not any(x.startswith(("healthy", "not ended")) for x in lines), lines


@pytest.mark.parametrize("measured", ["live", "summary"])
def test_a_node_that_computes_longer_is_the_culprit_and_no_link_is_blamed(tmp_path, measured):
    # trn-01 computes 60 ms a step, the others 20 ms and wait 40 ms more in collectives for it
    runs = write_job(tmp_path, own={0: 0.020, 1: 0.060, 2: 0.020}, coll={0: 0.042, 1: 0.002, 2: 0.042})
    if measured == "live":
        j = live(runs)
        c, lines = j["culprit"], j["lines"]
        assert (c["node"], c["ranks"], c["victim_nodes"], c["victims"]) == ("trn-01", [2, 3], ["trn-00", "trn-02"],
                                                                             4), c
        assert j["slow_collective"] is None
    else:
        job, lines = summary_lines(runs)
        s = job.slowest
        assert (s.node, s.node_ranks, s.victim_nodes, s.victims) == ("trn-01", [2, 3], ["trn-00", "trn-02"], 4)
        assert job.slow_collective is None
    assert any(x.startswith("node trn-01 (ranks 2, 3): ") for x in lines), lines
    assert not any("link" in x or "network" in x for x in lines), lines


@pytest.mark.parametrize("measured", ["live", "summary"])
def test_a_clean_job_names_neither(tmp_path, measured):
    runs = write_job(tmp_path, own={0: 0.020, 1: 0.020, 2: 0.020}, coll={0: 0.004, 1: 0.004, 2: 0.004})
    if measured == "live":
        j = live(runs)
        assert j["culprit"] is None and j["slow_collective"] is None, j["lines"]
        lines = j["lines"]
    else:
        job, lines = summary_lines(runs)
        assert job.slowest is None and job.slow_collective is None, lines
    assert not any("link" in x or "network" in x or "slower" in x for x in lines), lines
