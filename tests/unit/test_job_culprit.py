"""The rank that holds a job back, found on its own time (its steady step less its wait inside
collectives: core/reduce/ranks.py, core/job/culprit.py), where its time goes, and who waits for it; the
collective slow for everyone said apart; pre-sync time where collectives cannot be timed (XLA). On rows as
Prometheus gives them, and on real reduced events for the per-rank figures.

The real 2-node runs of each place are tests/runs/test_fleet_slow_places.py."""

from __future__ import annotations

import dataclasses

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.job.fleet import FleetRead, FleetRow, RankRow
from neurondesk.core.job.job_view import job_view
from neurondesk.core.reduce.state import RunState
from neurondesk.reports.job_text import job_json

NOW, JOB = 10_000.0, "j1"
NODES = [FleetRow(job_id=JOB, node=f"trn-0{i}", run_id=f"run-{i}", step=500, step_time_s=0.031, node_rank=i,
                  nodes=2, world_size=4, started_t=NOW - 600, last_update_t=NOW) for i in (0, 1)]


def rank(node: int, r: int, own: float, coll: float, presync: float = 0.0004, wait: float = 0.0) -> RankRow:
    return RankRow(JOB, f"trn-0{node}", f"run-{node}", r, presync_s=presync, step_time_s=own + coll, steps=500,
                   last_step_t=NOW, own_s=own, collective_s=coll, data_wait_s=wait)


def job(ranks: list[RankRow]) -> dict:
    return job_json(job_view(FleetRead(NODES, ranks, NOW), JOB))


def test_a_node_slow_between_its_backward_and_a_hand_written_all_reduce_is_the_culprit():
    # the case: every rank's pre-sync is the same 0.4 ms (it ends where backward starts); trn-01
    # spends 31 ms of its own a step, trn-00 10 ms and waits 21 ms in the all_reduce for it
    ranks = [rank(0, 0, 0.010, 0.021), rank(0, 1, 0.010, 0.021), rank(1, 2, 0.031, 0.0002), rank(1, 3, 0.031, 0.0003)]
    out = job(ranks)
    assert (out["slowest_node"], out["slowest_rank"]) == ("trn-01", 2)
    c = out["culprit"]
    assert c["ranks"] == [2, 3] and c["measure"] == "own" and c["place"] == "after-backward"
    assert c["victims"] == 2 and c["victim_nodes"] == ["trn-00"] and c["victim_wait_s"] == pytest.approx(0.021)
    line = next(x for x in out["lines"] if x.startswith("node trn-01"))
    assert line == ("node trn-01 (ranks 2, 3): 31 ms own time a step vs 10 ms on trn-00 (+210%), from its backward "
                    "to the collective; trn-00 (2 rank(s)) waits 21 ms a step in collectives for it")
    assert not any("network" in x for x in out["lines"]) and out["slow_collective"] is None


def test_a_node_slow_before_the_forward_for_its_data_is_said_so():
    ranks = [rank(0, 0, 0.010, 0.021, wait=0.001), rank(0, 1, 0.010, 0.021, wait=0.001),
             rank(1, 2, 0.031, 0.0, presync=0.022, wait=0.022), rank(1, 3, 0.031, 0.0, presync=0.022, wait=0.022)]
    out = job(ranks)
    assert out["slowest_node"] == "trn-01" and out["culprit"]["place"] == "data"
    assert any("waiting for its data, before the forward" in x for x in out["lines"])


def test_a_node_slow_in_its_forward_is_said_so():
    ranks = [rank(0, 0, 0.010, 0.021, presync=0.004), rank(0, 1, 0.010, 0.021, presync=0.004),
             rank(1, 2, 0.031, 0.0, presync=0.025), rank(1, 3, 0.031, 0.0, presync=0.025)]
    out = job(ranks)
    assert out["slowest_node"] == "trn-01" and out["culprit"]["place"] == "forward"


def test_one_rank_of_a_node_slow_names_that_rank_alone_and_its_node_peer_a_victim():
    ranks = [rank(0, 0, 0.010, 0.021), rank(0, 1, 0.010, 0.021), rank(1, 2, 0.031, 0.0), rank(1, 3, 0.010, 0.021)]
    c = job(ranks)["culprit"]
    assert (c["node"], c["ranks"], c["victims"]) == ("trn-01", [2], 3)
    assert c["victim_nodes"] == ["trn-00", "trn-01"]


def test_a_collective_slow_for_everyone_blames_no_rank_and_names_the_node_whose_collectives_are_slower():
    even = [rank(0, 0, 0.010, 0.021), rank(0, 1, 0.010, 0.021), rank(1, 2, 0.010, 0.021), rank(1, 3, 0.010, 0.021)]
    out = job(even)
    assert out["slowest_node"] is None and out["culprit"] is None
    assert out["slow_collective"]["node"] is None
    assert any("the network (EFA) or a node's link is slow" in x and "own time 10 ms" in x for x in out["lines"])
    link = [*even[:2], rank(1, 2, 0.010, 0.040), rank(1, 3, 0.010, 0.040)]  # own time normal, its collective slower
    out = job(link)
    assert out["slowest_node"] is None and out["slow_collective"]["node"] == "trn-01"
    assert any("the collective is slower on node trn-01 (40 ms a step vs 21 ms on the others)" in x
               for x in out["lines"])


def test_where_collectives_are_not_timed_the_pre_sync_time_finds_the_culprit():
    # XLA: every step's collective phase is 0, so own time is the step, the same on every rank
    ranks = [rank(0, 0, 0.3, 0.0, presync=0.1), rank(0, 1, 0.3, 0.0, presync=0.1), rank(1, 2, 0.3, 0.0, presync=0.1),
             rank(1, 3, 0.3, 0.0, presync=0.2)]
    out = job(ranks)
    assert (out["slowest_node"], out["slowest_rank"], out["culprit"]["measure"]) == ("trn-01", 3, "presync")


def test_a_clean_job_names_no_culprit_and_no_slow_collective():
    ranks = [rank(0, r, 0.010, 0.001) for r in (0, 1)] + [rank(1, r, 0.0102, 0.0008) for r in (2, 3)]
    out = job(ranks)
    assert out["culprit"] is None and out["slow_collective"] is None and out["healthy"]
    assert out["lines"][-1].startswith("healthy")
    noisy = [dataclasses.replace(ranks[2], own_s=0.0115)]  # +15% but under 2 ms: noise
    assert job([*ranks[:2], *noisy, ranks[3]])["culprit"] is None


def steps_of(pid: int, durations: list[float], colls: list[float], waits: list[float]) -> list[ev.Event]:
    return [ev.StepEnded(t=1.0 + i, pid=pid, step=i, duration_s=d, data_wait_s=w, presync_s=0.0004,
                         phases_s=[0.0, 0.001, 0.002, 0.0005, 0.0, c])
            for i, (d, c, w) in enumerate(zip(durations, colls, waits, strict=True))]


def test_a_ranks_own_time_is_its_steady_step_less_its_collective_wait_the_same_from_a_batch():
    n = 40
    durations = [0.031 + 0.001 * (i % 3) for i in range(n)]
    colls = [0.021 - 0.001 * (i % 3) for i in range(n)]
    waits = [0.002] * n
    one = RunState()
    for e in [ev.ProcessAttached(t=0.0, pid=7, rank=3), *steps_of(7, durations, colls, waits)]:
        one.apply(e)
    r = one.parts.ranks.ranks[7]
    warm = one.parts.run.warmup_steps
    assert r.own_s == pytest.approx(sorted(d - c for d, c in zip(durations[warm:], colls[warm:], strict=True))[17])
    assert r.collective_s == pytest.approx(0.020) and r.split_wait_s == pytest.approx(0.002)
    batched = RunState()
    batched.apply(ev.ProcessAttached(t=0.0, pid=7, rank=3))
    for e in steps_of(7, durations[:warm], colls[:warm], waits[:warm]):
        batched.apply(e)
    rest = steps_of(7, durations[warm:], colls[warm:], waits[warm:])
    batched.apply(ev.StepBatch(t=rest[-1].t, pid=7, step=warm, ts=[e.t for e in rest],
                               duration_s=[e.duration_s for e in rest], data_wait_s=[e.data_wait_s for e in rest],
                               presync_s=[e.presync_s for e in rest], phases_s=[x for e in rest for x in e.phases_s]))
    b = batched.parts.ranks.ranks[7]
    assert (b.own_s, b.collective_s, b.split_wait_s) == (r.own_s, r.collective_s, r.split_wait_s)
    unsplit = RunState()  # steps with no phases: no own time (the job compares pre-sync times)
    for e in steps_of(7, durations, colls, waits):
        unsplit.apply(dataclasses.replace(e, phases_s=None))
    assert unsplit.parts.ranks.ranks[7].own_s is None
