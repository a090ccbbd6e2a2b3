"""The slow node blamed right, wherever in its step it is slow: one real job of two nodes on loopback
(tests/multinode_harness.py: torchrun, c10d, gloo, 2 ranks a node, each node under its own recorder, a
real Prometheus), a hand-written data-parallel loop (tests/data/workloads/ddp_places.py: the gradients
all-reduced by `dist.all_reduce` after the backward, no DDP). Node trn-01 takes 3x the others' time a step,
at a place the test switches live: nowhere (a clean job), between the backward and the all_reduce (every
rank's pre-sync time is the same there), before the forward in its DataLoader, inside a collective.

`fleet --once --format json` names trn-01 and its ranks as the culprit with the place, trn-00's ranks as
its victims, and blames no network where a node computes slowly; a slow collective blames no rank."""

from __future__ import annotations

import pytest
from conftest import DATA
from multinode_harness import job_json, launch, stop_job
from prometheus_harness import wait_for

JOB = "7002"
WORKLOAD = DATA / "workloads" / "ddp_places.py"


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("places")
    prom, control, procs = launch(tmp, WORKLOAD, JOB, {"ND_SLOW_NODE": "1", "ND_STEP_S": "0.04"})
    try:
        yield prom, control
    finally:
        stop_job(prom, control, procs)


def settled(prom, want, what: str, timeout_s: float = 180) -> dict:
    """The job's JSON once ``want(job)`` holds (the per-rank medians cover the last 50 steady steps: a
    switch of place shows a few seconds on), else the last one read (the test's asserts say what it is)."""
    try:
        return wait_for(lambda: (o := job_json(prom, JOB)) and o["job"]["ranks"] == 4 and want(o["job"]) and o,
                        timeout_s, what)
    except AssertionError:
        return job_json(prom, JOB)


def named(j: dict, place: str) -> bool:
    """trn-01 named at ``place`` with both victims, once its own time's median covers the slow steps (3x
    the others': while the 50-step window still mixes steps from before the switch it is in between)."""
    c = j["culprit"] or {}
    return (c.get("place") == place and c.get("victims") == 2
            and (c.get("own_s") or 0) > 2 * (c.get("median_own_s") or float("inf")))


def slow_at(places, where: str) -> None:
    (places[1] / "place").write_text(where)


def node_ranks(out: dict, node: str) -> list[int]:
    return sorted(r["rank"] for r in out["ranks"] if r["node"] == node)


def assert_culprit(out: dict, place: str) -> None:
    j = out["job"]
    c = j["culprit"]
    assert c is not None, (j["lines"], out["ranks"])
    slow, fast = node_ranks(out, "trn-01"), node_ranks(out, "trn-00")
    assert (j["slowest_node"], c["ranks"], c["measure"], c["place"]) == ("trn-01", slow, "own", place), (c, out["ranks"])
    assert j["slowest_rank"] in slow and c["victim_nodes"] == ["trn-00"] and c["victims"] == len(fast), c
    assert c["own_s"] > 2 * c["median_own_s"]  # 3x: about 120 ms against 40 ms
    by_rank = {r["rank"]: r for r in out["ranks"]}
    assert all(by_rank[r]["collective_s"] > by_rank[s]["collective_s"] for r in fast for s in slow)
    assert not any("network" in line for line in j["lines"]) and j["slow_collective"] is None
    line = next(x for x in j["lines"] if x.startswith(f"node trn-01 (ranks {slow[0]}, {slow[1]}): "))
    assert "own time a step vs" in line and "on trn-00" in line and "trn-00 (2 rank(s)) waits" in line


def test_a_clean_job_names_no_culprit(places):
    prom = places[0]
    out = settled(prom, lambda j: j["step_verdicts"] and len(j["step_verdicts"]) == 2, "both nodes' steady steps")
    j = out["job"]
    assert j["culprit"] is None and j["slowest_node"] is None and j["slow_collective"] is None, (j["lines"], out["ranks"])
    assert all(r["own_s"] is not None and r["collective_s"] is not None for r in out["ranks"]), out["ranks"]


def test_a_node_slow_between_its_backward_and_the_all_reduce_is_the_culprit(places):
    slow_at(places, "after-backward")
    out = settled(places[0], lambda j: named(j, "after-backward"), "trn-01 named, slow after its backward")
    assert_culprit(out, "after-backward")
    # what the pre-sync time alone could not tell: it ends where the backward starts, the same everywhere
    pre = [r["presync_s"] for r in out["ranks"]]
    assert max(pre) < 0.5 * out["job"]["culprit"]["own_s"]


def test_a_node_slow_for_its_data_before_the_forward_is_the_culprit(places):
    slow_at(places, "data")
    out = settled(places[0], lambda j: named(j, "data"), "trn-01 named, waiting for its data")
    assert_culprit(out, "data")


def test_a_node_slow_inside_a_collective_blames_no_rank_but_the_collective(places):
    slow_at(places, "collective")
    out = settled(places[0], lambda j: j["slow_collective"] is not None, "the collective named slow")
    j = out["job"]
    assert j["culprit"] is None and j["slowest_node"] is None, (j["lines"], out["ranks"])
    c = j["slow_collective"]
    assert c is not None and c["share"] >= 0.5, (j["lines"], out["ranks"])
    assert any(line.startswith("no rank is slower than the others (own time") for line in j["lines"])
    # a collective made inside another (all_gather_object's all_gather) is counted once: never more than the step
    assert all(r["collective_s"] <= r["step_time_s"] for r in out["ranks"]), out["ranks"]
