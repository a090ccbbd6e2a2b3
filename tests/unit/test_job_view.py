"""The job view's rules (core/job/job_view.py) on rows as Prometheus gives them, and their words
(reports/job_text.py): culprit and victims, compile skew and its cost, the first failure across clocks,
blocked ranks, stale nodes, and each kind of bad input as one line with no figure mixed."""

from __future__ import annotations

import dataclasses

import pytest

from neurondesk.core.job.fleet import FleetRead, FleetRow, ForeignNode, NodeFailure, RankRow, fleet_totals
from neurondesk.core.job.job_view import job_view, pick_job
from neurondesk.core.node.flight_recorder import BlockedCollective
from neurondesk.reports.job_text import job_json, job_lines

NOW = 10_000.0
JOB = "j1"


def row(node: str, rank: int, **kw) -> FleetRow:
    base = dict(job_id=JOB, node=node, run_id=f"run-{node}", step=500, price_per_hour=21.5, cost_usd=10.0,
                samples_per_s=100.0, tokens_per_s=1e5, step_time_s=0.3, started_t=NOW - 3600, last_update_t=NOW,
                compiles=3, compile_s=30.0, node_rank=rank, nodes=4, world_size=8, clock_skew_s=-0.2,
                instance=f"10.0.0.{rank}:9464")
    return FleetRow(**(base | kw))


def ranks_of(node: str, first: int, presync: float, step: float = 0.3, last_t: float = NOW) -> list[RankRow]:
    return [RankRow(JOB, node, f"run-{node}", r, presync_s=presync, step_time_s=step, steps=500, last_step_t=last_t)
            for r in (first, first + 1)]


def job(rows: list[FleetRow], ranks: list[RankRow], foreign=()) -> dict:
    view = job_view(FleetRead(rows, ranks, NOW, list(foreign)), JOB)
    return job_json(view) | {"view": view}


NODES = [row(f"trn-{i}", i) for i in range(4)]


def even_ranks(presync=0.1):
    return [r for i in range(4) for r in ranks_of(f"trn-{i}", 2 * i, presync)]


def test_a_clean_job_names_no_one_and_says_healthy():
    out = job(NODES, even_ranks(presync=0.25))  # 17% of the step after the sync: no slow collective
    assert out["slowest_node"] is None and out["healthy"] and out["failed_node"] is None
    assert out["lines"][-1].startswith("healthy")
    assert out["usd_per_hour"] == pytest.approx(86.0) and out["steady_samples_per_s"] == pytest.approx(400.0)


def test_the_rank_that_computes_long_is_the_culprit_and_the_others_its_victims():
    ranks = even_ranks()
    ranks[5] = dataclasses.replace(ranks[5], presync_s=0.131)  # node trn-2, rank 5: +31% before the sync
    out = job(NODES, ranks)
    assert (out["slowest_node"], out["slowest_rank"]) == ("trn-2", 5)
    assert out["slowest_vs_median"] == pytest.approx(0.31)
    assert any(line.startswith("node trn-2 (rank 5) is 31% slower") and "the other 7 rank(s) wait" in line
               for line in out["lines"])
    ranks[5] = dataclasses.replace(ranks[5], presync_s=0.105)  # +5%: noise, not a culprit
    assert job(NODES, ranks)["slowest_node"] is None


def test_every_rank_waiting_long_with_no_culprit_points_at_the_collective():
    out = job(NODES, even_ranks(presync=0.05))  # 0.25 s of a 0.3 s step inside the all-reduce
    assert out["slowest_node"] is None and out["collective_wait_share"] == pytest.approx(0.25 / 0.3)
    assert any("the network (EFA) or a node's link is slow" in line for line in out["lines"])


def test_a_node_compiling_a_graph_the_others_are_past_is_named_and_its_wait_counted():
    rows = [*NODES[:3], row("trn-3", 3, compiling_for_s=252.0, compile_graph=4, compiles=3, cache_misses=1)]
    rows[0] = dataclasses.replace(rows[0], cache_hits=4, compiles=4)
    rows[1] = dataclasses.replace(rows[1], compiles=4)
    out = job(rows, even_ranks())
    assert out["compiling_nodes"] == [{"node": "trn-3", "graph": 4, "for_s": 252.0, "nodes_past_it": 2}]
    line = next(x for x in out["lines"] if x.startswith("trn-3 compiling"))
    assert line == ("trn-3 compiling graph #4 for 4:12 (1 cache miss(es) on it; 2 node(s) already had it, "
                    "1 of them from their cache); the job waits")
    f = out["view"].figures
    assert f.compile_wall_s == pytest.approx(282.0)  # its 30 s done + 252 s in progress: everyone waited that
    assert f.compile_wait_s == pytest.approx(3 * 252.0)


def test_the_first_failure_is_told_across_clocks_and_the_rest_blocked_since():
    killed = NodeFailure(t=NOW - 60, rank=5, what="SIGKILL (torchrun: exitcode -9)", last_line="Killed", step=480)
    later = NodeFailure(t=NOW - 75, rank=1, what="RuntimeError: CUDA error: an illegal memory access", last_line="",
                        step=480)
    rows = [dataclasses.replace(NODES[0], failure=later, clock_skew_s=-30.0),  # its clock is 30 s behind
            NODES[1], dataclasses.replace(NODES[2], failure=killed, finished=True, exit_code=1), NODES[3]]
    ranks = [*ranks_of("trn-0", 0, 0.1, last_t=NOW - 105), *ranks_of("trn-1", 2, 0.1, last_t=NOW - 62),
             *ranks_of("trn-2", 4, 0.1, last_t=NOW - 61), *ranks_of("trn-3", 6, 0.1, last_t=NOW - 62)]
    out = job(rows, ranks)
    assert (out["failed_node"], out["failed_rank"]) == ("trn-2", 5)  # trn-0's -75 is -45 on Prometheus's clock
    assert out["blocked_ranks"] == 6 and not out["healthy"]  # trn-2 finished: its ranks are not blocked
    assert any(line.startswith("failed first: rank 5 on node trn-2") and "SIGKILL" in line and "Killed" in line
               for line in out["lines"])
    assert any("clock is 30 s behind Prometheus's" in p for p in out["problems"])


def test_a_peers_death_on_another_node_reported_first_is_not_the_jobs_first_failure():
    """The killed rank's node hears of it from torchrun's report (dated to the second); the other node's
    ranks die of it a moment later (gloo: the peer closed) and can be heard first. The cause is named."""
    killed = NodeFailure(t=NOW - 60, rank=2, what="SIGKILL (torchrun: exitcode -9)", last_line="", step=40)
    gone = NodeFailure(t=NOW - 60.5, rank=0, what="RuntimeError: [pair.cc:534] Connection closed by peer "
                       "[127.0.0.1]:1234", last_line="", step=40)
    rows = [dataclasses.replace(NODES[0], failure=gone), dataclasses.replace(NODES[1], failure=killed), *NODES[2:]]
    ranks = [*ranks_of("trn-0", 0, 0.1, last_t=NOW - 61), *ranks_of("trn-1", 2, 0.1, last_t=NOW - 61),
             *ranks_of("trn-2", 4, 0.1, last_t=NOW - 61), *ranks_of("trn-3", 6, 0.1, last_t=NOW - 61)]
    out = job(rows, ranks)
    assert (out["failed_node"], out["failed_rank"]) == ("trn-1", 2)
    # only consequences: the earliest of them
    other = NodeFailure(t=NOW - 59, rank=2, what="RuntimeError: Socket Timeout", last_line="", step=40)
    out = job([dataclasses.replace(NODES[0], failure=gone), dataclasses.replace(NODES[1], failure=other),
               *NODES[2:]], ranks)
    assert (out["failed_node"], out["failed_rank"]) == ("trn-0", 0)


def at(t: float) -> str:
    import time

    return time.strftime("%H:%M:%S", time.localtime(t))


def test_a_hang_names_the_blocked_collective_per_node_and_the_rank_that_never_entered_it():
    """No failure, a hang: the node's Flight Recorder series (FleetRow.blocked_collective) make the line."""
    stuck = BlockedCollective(op="nccl:all_reduce", seq=412, group="default_pg", state="started", shapes="",
                              ranks=(4,), never_entered=(5,), last=(411,))
    rows = [*NODES[:2], dataclasses.replace(NODES[2], blocked_collective=stuck), NODES[3]]
    ranks = [*[r for i in (0, 1, 3) for r in ranks_of(f"trn-{i}", 2 * i, 0.1, last_t=NOW - 300)],
             *ranks_of("trn-2", 4, 0.1, last_t=NOW - 301)]
    out = job(rows, ranks)
    assert not out["healthy"] and out["failed_node"] is None
    assert (f"1 rank(s) blocked in a collective since {at(NOW - 301)}: nccl:all_reduce #412 of default_pg on trn-2 "
            "(rank 4); rank 5 never entered it (last: #411)") in out["lines"]
    assert not any(line.startswith("healthy") for line in out["lines"])
    assert out["blocked_collective"] == [{"node": "trn-2", "op": "nccl:all_reduce", "seq": 412, "group": "default_pg",
                                          "state": "started", "ranks": [4], "never_entered": [5], "last": [411]}]
    assert job(NODES, ranks)["blocked_collective"] == []  # no node reports one: none said


def test_after_a_failure_the_blocked_ranks_line_names_their_collective():
    killed = NodeFailure(t=NOW - 60, rank=5, what="SIGKILL", last_line="", step=480)
    stuck = BlockedCollective(op="gloo:all_reduce", seq=9, group="default_pg", state="scheduled", shapes="",
                              ranks=(0, 1), never_entered=(), last=())
    rows = [dataclasses.replace(NODES[0], blocked_collective=stuck), NODES[1],
            dataclasses.replace(NODES[2], failure=killed, finished=True, exit_code=1), NODES[3]]
    ranks = [*ranks_of("trn-0", 0, 0.1, last_t=NOW - 62), *ranks_of("trn-1", 2, 0.1, last_t=NOW - 62),
             *ranks_of("trn-2", 4, 0.1, last_t=NOW - 61), *ranks_of("trn-3", 6, 0.1, last_t=NOW - 62)]
    lines = job(rows, ranks)["lines"]
    assert (f"6 rank(s) blocked in a collective since {at(NOW - 62)}: gloo:all_reduce #9 of default_pg on trn-0 "
            "(ranks 0, 1)") in lines
    stale = [dataclasses.replace(r, stale=True, last_update_t=NOW - 120) if r.node == "trn-0" else r for r in rows]
    assert not any("gloo:all_reduce" in line for line in job(stale, ranks)["lines"])  # a silent node's: not said


def test_a_node_that_went_silent_is_stale_and_the_job_not_healthy():
    rows = [*NODES[:3], dataclasses.replace(NODES[3], stale=True, last_update_t=NOW - 120)]
    out = job(rows, even_ranks())
    assert out["stale_nodes"] == ["trn-3"] and not out["healthy"]
    assert out["usd_per_hour"] == pytest.approx(86.0)  # a silent node still bills


@pytest.mark.parametrize("bad, words", [
    ("duplicate", "node name 'trn-1' is reported by 2 recorders"),
    ("rank_range", "says node rank 7 of a job of 4 node(s): out of range"),
    ("rank_twice", "both say node rank 1"),
    ("missing", "3 of the job's 4 nodes report"),
    ("foreign", "reports job id 'old-job', not 'j1': left out of this job's figures"),
])
def test_bad_input_is_one_line_and_mixes_no_figure(bad, words):
    rows, foreign = list(NODES), []
    if bad == "duplicate":
        rows.append(dataclasses.replace(NODES[1], run_id="run-again", instance="10.0.0.9:9464"))
    elif bad == "rank_range":
        rows[3] = dataclasses.replace(rows[3], node_rank=7)
    elif bad == "rank_twice":
        rows[3] = dataclasses.replace(rows[3], node_rank=1)
    elif bad == "missing":
        rows = rows[:3]
    elif bad == "foreign":
        foreign = [ForeignNode("10.0.0.8:9464", "trn-8", "old-job", "neurondesk")]
    out = job(rows, even_ranks(), foreign)
    assert sum(words in p for p in out["problems"]) == 1, out["problems"]
    assert not out["healthy"]
    priced = len(rows)
    assert out["usd_per_hour"] == pytest.approx(21.5 * priced)  # the foreign node's price is not in it


def test_the_job_shown_is_the_one_asked_for_else_the_one_with_most_nodes():
    other = [dataclasses.replace(r, job_id="other") for r in NODES[:2]]
    read = FleetRead([*NODES, *other], even_ranks(), NOW)
    assert pick_job(read, None) == JOB and pick_job(read, "other") == "other"
    view = job_view(read, "other")
    assert len(view.nodes) == 2 and view.ranks == []  # ranks of j1's nodes are not other's
    early = dataclasses.replace(NODES[0], job_id="", stale=True)  # its first scrapes, before the workers said
    assert job_view(FleetRead([early, *NODES], even_ranks(), NOW), JOB).nodes == NODES
    assert job_lines(job_view(FleetRead([early], [], NOW), ""))[0].startswith("job (no job id)")


def test_a_nodes_health_is_said_beside_its_slowness():
    ranks = even_ranks()
    ranks[5] = dataclasses.replace(ranks[5], presync_s=0.2)
    rows = [*NODES[:2], dataclasses.replace(NODES[2], health="trn-2: 412 EFA retransmits in the last minute"),
            NODES[3]]
    out = job(rows, ranks)
    slow = next(i for i, x in enumerate(out["lines"]) if x.startswith("node trn-2 (rank 5)"))
    assert out["lines"][slow + 1] == "trn-2: 412 EFA retransmits in the last minute"
    assert out["node_health"] == {"trn-2": "trn-2: 412 EFA retransmits in the last minute"}
    assert not any(x.startswith("healthy") for x in job(rows, even_ranks())["lines"])


def test_what_bounds_each_nodes_step_is_said_with_the_nodes_of_one_verdict_together():
    verdicts = ["collective-bound", "input-bound", "collective-bound", "compute-bound"]
    rows = [dataclasses.replace(r, step_verdict=v) for r, v in zip(NODES, verdicts, strict=True)]
    rows[3] = dataclasses.replace(rows[3], stale=True, last_update_t=NOW - 120)  # a silent node's is not said
    out = job(rows, even_ranks())
    assert out["step_verdicts"] == {"trn-0": "collective-bound", "trn-1": "input-bound", "trn-2": "collective-bound"}
    assert "steady step: collective-bound on trn-0, trn-2; input-bound on trn-1" in out["lines"]
    assert not any(line.startswith("steady step") for line in job(NODES, even_ranks())["lines"])  # none known: no line


def test_what_a_dead_rank_leaves_behind_is_never_the_cause():
    """torchrun's own ChildFailedError (its agent: no rank) and a peer's closed connection come after
    the rank that died, sometimes heard before it; the rule takes the cause, else the earliest."""
    from neurondesk.core.node.failure_cause import first_cause, is_consequence

    launcher = (10.0, "ChildFailedError: workloads/ddp.py FAILED")
    peer = (9.5, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer")
    killed = (11.0, "SIGKILL (torchrun: exitcode -9)")  # torchrun's report, read last
    assert is_consequence(launcher[1]) and is_consequence(peer[1]) and not is_consequence(killed[1])
    assert first_cause([launcher, peer], lambda f: f[0], lambda f: f[1]) == peer  # only consequences so far
    assert first_cause([launcher, peer, killed], lambda f: f[0], lambda f: f[1]) == killed
    crash = (12.0, "RuntimeError: CUDA error: an illegal memory access")
    assert first_cause([crash, killed], lambda f: f[0], lambda f: f[1]) == killed  # two causes: the earlier
    assert first_cause([], lambda f: f[0], lambda f: f[1]) is None


def test_the_fleet_totals_money_is_the_job_figures_on_one_screen():
    """The fleet screen's totals line and the job view beside it: one computation (core/job/job_figures.py),
    a stale node's price and a node whose cost is not scraped yet included in both."""
    rows = [*NODES[:2], dataclasses.replace(NODES[2], stale=True, price_per_hour=24.78, cost_usd=12.0),
            dataclasses.replace(NODES[3], cost_usd=None, last_update_t=None, clock_skew_s=None)]
    read = FleetRead(rows, even_ranks(), NOW)
    totals, figures = fleet_totals(rows, read.now), job_view(read, JOB).figures
    assert (totals.price_per_hour, totals.cost_usd) == (figures.price_per_hour, figures.total_usd)
    assert totals.price_per_hour == pytest.approx(3 * 21.5 + 24.78)
    assert totals.cost_usd == pytest.approx(10.0 + 10.0 + 12.0 + 21.5)  # the last: an hour at $21.50, to now


def test_a_job_whose_ranks_wait_most_of_their_step_in_the_collective_is_not_said_healthy():
    out = job(NODES, even_ranks(presync=0.1))  # 200 ms of a 300 ms step after the sync, on every rank
    assert out["slow_collective"] is not None and out["slowest_node"] is None
    assert any("the network (EFA) or a node's link is slow" in x for x in out["lines"])
    assert not any(x.startswith("healthy") for x in out["lines"]), out["lines"]
