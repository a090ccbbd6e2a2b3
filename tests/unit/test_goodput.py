"""Goodput from events (core/reduce/attempts.py, core/figures/goodput.py): attempts told by the launchers'
restart counts or by a rank seen again after a failure, the resumed step, the steps lost, the badput kinds
adding up to the wall time, checkpoint seconds as typed inputs, a job restarted 100 times (bounded), and
the outputs that read it (Prometheus, the CI gate, compare, the job summary, torchrun's agent line).
The processes here are events; tests/runs/test_goodput_runs.py has the real torchrun jobs."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from neurondesk.collectors.logparse.torchelastic import TorchElasticParser
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.attempt_events import StepResumed
from neurondesk.core.figures.goodput import KINDS, GoodputInputs, goodput
from neurondesk.core.job.job_goodput import job_goodput
from neurondesk.core.reduce.attempts import KEEP
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.checks import Thresholds, evaluate
from neurondesk.core.rules.compare import compare
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import SUMMARY_VERSION, Summary

T0 = 1_000_000.0
STEP_S = 0.1


def hello(t, pid, rank, restart: int | None = 0, var="TORCHELASTIC_RESTART_COUNT"):
    env = {"RANK": str(rank), "WORLD_SIZE": "2"} | ({var: str(restart)} if restart is not None else {})
    return ev.ProcessAttached(t=t, pid=pid, rank=rank, world_size=2, launch_env=env)


def steps(pid, n, start_t):
    """``n`` steps of STEP_S from ``start_t``, one event each; the time after them."""
    out = [ev.StepEnded(t=start_t + (i + 1) * STEP_S, pid=pid, step=i, duration_s=STEP_S) for i in range(n)]
    return out, start_t + n * STEP_S


def attempt(t, pids, number, n, resumed=None, var="TORCHELASTIC_RESTART_COUNT", fail_rank=None):
    """One attempt: hellos, a resumed step (if any), ``n`` steps on every rank, a failure of ``fail_rank``."""
    out = [hello(t, pid, rank, number, var) for rank, pid in enumerate(pids)]
    t += 1.0  # its start-up
    if resumed is not None:
        out += [StepResumed(t=t, pid=pid, step=resumed) for pid in pids]
    end = t
    for pid in pids:
        s, end = steps(pid, n, t)
        out += s
    if fail_rank is not None:
        out.append(ev.ProcessFailed(t=end + 0.05, pid=pids[fail_rank], error="RuntimeError: boom", step=n,
                                    traceback=["  File \"train.py\", line 9, in <module>", "RuntimeError: boom"]))
    return out, end + 0.05


def reduced(events, exit_code=0, price=3.6):
    s = RunState()
    s.apply(ev.RunStarted(t=T0, run_id="r", command=["torchrun", "train.py"], price_per_hour=price))
    for e in events:
        s.apply(e)
    end = max(e.t for e in events) + 0.5
    s.apply(ev.RunFinished(t=end, exit_code=exit_code))
    return s


def restarted_once(resumed=50, var="TORCHELASTIC_RESTART_COUNT", restart_counts=True):
    a, t = attempt(T0 + 1, [11, 12], 0 if restart_counts else None, 60, var=var, fail_rank=1)
    b, _ = attempt(t + 5.0, [21, 22], 1 if restart_counts else None, 70, resumed=resumed, var=var)
    return reduced(a + b)


def test_a_restart_is_an_attempt_of_the_same_ranks_and_the_job_reaches_its_step():
    s = restarted_once()
    g = goodput(s)
    assert (g.restarts, g.max_step, g.steps_lost, g.ended) == (1, 120, 10, "finished after 1 restart")
    assert (s.steps_done, s.world, s.parts.ranks.before, sorted(r.rank for r in s.parts.ranks.by_rank())) == (
        120, 2, 2, [0, 1])
    (d,) = g.disruptions
    assert (d.attempt, d.rank, d.pid, d.step, d.cause, d.steps_lost) == (0, 1, 12, 60, "RuntimeError: boom", 10)
    assert d.traceback[-1] == "RuntimeError: boom"
    assert d.recovery_s == pytest.approx(5.0 + 1.0)  # the failure to the hellos, then their start-up to step 0
    assert g.badput["wasted_progress"] == pytest.approx(10 * STEP_S)
    summary = run_summary(s)
    assert summary.crash is None and summary.failed_rank is None and summary.goodput.restarts == 1


def test_the_kinds_add_up_to_the_wall_time_and_are_priced():
    s = restarted_once()
    g = goodput(s)
    assert set(g.badput) == set(KINDS)
    assert g.productive_s + sum(g.badput.values()) == pytest.approx(g.wall_s, abs=0.01)
    assert g.fraction == pytest.approx(g.productive_s / g.wall_s, abs=1e-3)
    assert g.badput_usd["restart_recovery"] == pytest.approx(g.badput["restart_recovery"] * 3.6 / 3600, abs=1e-6)
    # the productive time is the training steps less the steps run twice: 60 + 70 steps, 10 again
    assert g.productive_s == pytest.approx(120 * STEP_S, abs=0.01)


def test_checkpoint_seconds_are_inputs_taken_from_the_recovery_and_the_time_between_steps():
    s = restarted_once()
    base = goodput(s)
    g = goodput(s, inputs=GoodputInputs(checkpoint_save_s=0.2, checkpoint_load_s=1.5))
    assert (g.badput["checkpoint_save"], g.badput["checkpoint_load"]) == (0.2, 1.5)
    assert g.badput["restart_recovery"] == pytest.approx(base.badput["restart_recovery"] - 1.5, abs=1e-3)
    assert g.productive_s + sum(g.badput.values()) == pytest.approx(g.wall_s, abs=0.01)
    huge = goodput(s, inputs=GoodputInputs(checkpoint_save_s=1e6))  # more than the run: capped, never negative
    assert huge.productive_s >= 0 and huge.productive_s + sum(huge.badput.values()) == pytest.approx(
        huge.wall_s, abs=0.01)


def test_ranks_back_with_other_pids_and_no_restart_count_are_the_next_attempt():
    """A launcher that says no restart count (a script's own retry loop, a custom agent): rank 1 seen again
    with another pid after attempt 0 failed."""
    s = restarted_once(restart_counts=False)
    g = goodput(s)
    assert (g.restarts, g.max_step, g.steps_lost, s.world) == (1, 120, 10, 2)


def test_slurm_restart_count_tells_the_attempt_too():
    g = goodput(restarted_once(var="SLURM_RESTART_COUNT"))
    assert (g.restarts, g.steps_lost) == (1, 10)


def test_a_restart_that_says_no_resumed_step_is_taken_as_a_start_over_and_said():
    s = restarted_once(resumed=None)
    g = goodput(s)
    assert (g.steps_lost, g.max_step, g.resume_known) == (60, 70, False)
    assert any("taken as a start over" in line for line in __import__(
        "neurondesk.reports.goodput_text", fromlist=["x"]).goodput_lines(run_summary(s)))


def test_a_resumed_step_below_the_previous_resume_is_said_and_lost_steps_follow_it():
    a, t = attempt(T0 + 1, [11, 12], 0, 30, resumed=100, fail_rank=0)  # began at 100 (a checkpoint), reached 130
    b, _ = attempt(t + 2, [21, 22], 1, 50, resumed=25)  # resumed from 25: an older checkpoint than 100
    g = goodput(reduced(a + b))
    assert (g.steps_lost, g.max_step) == (105, 130)
    assert any("below the step 100" in p for p in g.problems)


def test_a_resumed_step_past_what_was_reached_counts_no_steps_lost_and_says_why():
    a, t = attempt(T0 + 1, [11, 12], 0, 30, fail_rank=0)
    b, _ = attempt(t + 2, [21, 22], 1, 10, resumed=500)
    g = goodput(reduced(a + b))
    assert g.steps_lost == 0 and any("past the step 30" in p for p in g.problems)


def test_a_job_restarted_100_times_keeps_a_bounded_summary_and_counts_every_restart():
    events, t = [], T0 + 1
    for n in range(101):
        pids = [1000 + 2 * n, 1001 + 2 * n]
        a, t = attempt(t, pids, n, 10, resumed=5 * n if n else None, fail_rank=1 if n < 100 else None)
        events += a
        t += 0.5
    s = reduced(events)
    g = goodput(s)
    assert (g.restarts, g.disruptions_total, g.ended) == (100, 100, "finished after 100 restarts")
    assert g.steps_lost == 100 * 5  # each attempt reached 5 past where the next resumed
    assert len(s.parts.attempts.attempts) == KEEP and len(g.disruptions) <= 20
    assert g.productive_s + sum(g.badput.values()) == pytest.approx(g.wall_s, abs=0.05)
    assert len(msgspec.json.encode(run_summary(s).goodput)) < 20_000
    assert s.world == 2 and len(s.parts.ranks.ranks) == 2


def test_a_job_that_died_on_its_last_attempt_is_died_after_its_restarts():
    a, t = attempt(T0 + 1, [11, 12], 0, 20, fail_rank=1)
    b, _ = attempt(t + 2, [21, 22], 1, 20, resumed=10, fail_rank=1)
    s = reduced(a + b, exit_code=1)
    g = goodput(s)
    assert g.ended == "died after 1 restart" and [d.attempt for d in g.disruptions] == [0, 1]
    assert run_summary(s).crash.rank == 1


def test_torchruns_agent_line_names_the_rank_that_died_without_a_python_error():
    out: list = []
    line = ("E1206 00:31:48.443000 7077 /x/torch/distributed/elastic/multiprocessing/api.py:882] failed "
            "(exitcode: -9) local_rank: 1 (pid: 7091) of binary: /usr/bin/python")
    TorchElasticParser().feed(line, 5.0, out)
    (e,) = out
    assert (e.rank, e.pid, e.exit_code, e.signal, e.root_cause) == (1, 7091, -9, "SIGKILL", True)


def test_the_ci_gate_and_compare_read_goodput():
    s = run_summary(restarted_once())
    share = s.goodput.fraction
    assert evaluate(s, Thresholds(min_goodput=share / 2)) == []
    (failed,) = evaluate(s, Thresholds(min_goodput=min(1.0, share + 0.1)))
    assert failed.startswith(f"goodput {share:.1%} below min") and "badput:" in failed
    assert evaluate(Summary(summary_version=SUMMARY_VERSION, steps=5), Thresholds(min_goodput=0.5)) == [
        "goodput unknown (a summary written before goodput, or no wall time), min 50%"]
    one = run_summary(reduced(attempt(T0 + 1, [11, 12], 0, 60)[0]))
    rows = {r["key"]: r for r in compare([s, one])["rows"]}
    assert rows["restarts"]["values"] == [1, 0] and rows["restarts"]["best"] == 1
    assert rows["goodput"]["values"] == [share, one.goodput.fraction]


def test_the_job_goodput_sums_node_seconds_and_names_the_node_that_failed():
    g = goodput(restarted_once())
    calm = goodput(reduced(attempt(T0 + 1, [31, 32], 0, 60)[0]))
    j = job_goodput([("node-a", [calm]), ("node-b", [g])])
    assert j.restarts == 1 and [x.node for x in j.disruptions] == ["node-b"]
    assert j.wall_s == pytest.approx(g.wall_s + calm.wall_s, abs=1e-3)
    assert j.restart_cost_s == pytest.approx(g.badput["wasted_progress"] + g.badput["restart_recovery"], abs=1e-3)


def test_a_restart_torchrun_did_not_count_is_the_next_attempt():
    """Many nodes: torchrun restarts a node's workers without counting it when another node re-joins the
    rendezvous, so they say restart count 0 again; after a failure on this node, or started again by the same
    parent (no failure here: its agent stopped healthy workers), the rank is the next attempt's."""
    def parented(events, ppid):
        return [dataclasses.replace(e, ppid=ppid) if isinstance(e, ev.ProcessAttached) else e for e in events]

    a, t = attempt(T0 + 1, [11, 12], 0, 60, fail_rank=1)
    b, _ = attempt(t + 5.0, [21, 22], 0, 70, resumed=50)
    calm, t2 = attempt(T0 + 1, [11, 12], 0, 60)
    for s in (reduced(a + b), reduced(parented(calm, 5) + parented(attempt(t2 + 5.0, [21, 22], 0, 70, resumed=50)[0], 5))):
        g = goodput(s)
        assert (g.restarts, g.max_step, g.steps_lost, g.ended) == (1, 120, 10, "finished after 1 restart"), g
        assert g.problems == []
    # a DataLoader worker of rank 0 (its child, the same RANK and count) after a failure is no new attempt
    worker = dataclasses.replace(hello(t + 0.01, 99, 0, 0), ppid=11)
    g = goodput(reduced([*a, worker]))
    assert (g.restarts, g.max_step) == (0, 60)


def test_a_restarts_cause_comes_first_and_the_nodes_that_ended_with_it_name_it():
    """Node b's rank fails; node a's rank loses its peer and its word is dated before node b's (a silent death
    is dated when torchrun reports it): one restart of the job, node b its cause, node a ending with it."""
    b = goodput(restarted_once())
    first, t = attempt(T0 + 1, [31, 32], 0, 60)
    lost = ev.ProcessFailed(t=t - 0.04, pid=31, step=60, error="RuntimeError: [pair.cc:538] Read error "
                            "[127.0.0.1]:51590: Connection reset by peer")
    again, _ = attempt(t + 5.0, [41, 42], 1, 70, resumed=50)
    a = goodput(reduced([*first, lost, *again]))
    assert a.disruptions[0].t < b.disruptions[0].t
    j = job_goodput([("node-a", [a]), ("node-b", [b])])
    assert [(x.node, x.with_node) for x in j.disruptions] == [("node-b", None), ("node-a", "node-b")]
    assert (j.restarts, j.steps_lost) == (1, 10)


def test_prometheus_series_of_goodput():
    from types import SimpleNamespace

    from neurondesk.core.figures.run_figures import run_figures
    from neurondesk.exporter.goodput import goodput_families

    fams = {f.name: f for f in goodput_families(SimpleNamespace(figures=run_figures(restarted_once())), ["j", "n", "r"])}
    assert fams["neurondesk_restarts"].samples[0].value == 1
    kinds = {s.labels["kind"] for s in fams["neurondesk_badput_seconds"].samples if s.name.endswith("_total")}
    assert kinds == set(KINDS)
    assert 0 < fams["neurondesk_goodput_ratio"].samples[0].value < 1


def test_a_relaunch_with_the_same_job_is_an_attempt_of_the_job():
    """A requeued job (a new run folder, the same job id): the node's two runs are its attempts."""
    first = goodput(reduced(attempt(T0 + 1, [11, 12], 0, 60, fail_rank=1)[0], exit_code=1))
    again = goodput(reduced(attempt(T0 + 100, [21, 22], 0, 70, resumed=50)[0]))
    assert (first.max_step, again.first_step, again.max_step) == (60, 50, 120)
    j = job_goodput([("node-a", [first, again])])
    assert (j.restarts, j.relaunches, j.steps_lost, j.max_step) == (1, 1, 10, 120)
    assert j.wall_s == pytest.approx(first.wall_s + again.wall_s, abs=1e-3)
    assert [x.disruption.rank for x in j.disruptions] == [1]


def test_a_restart_that_compiles_again_what_the_first_attempt_compiled_says_the_cache_was_not_shared():
    a, t = attempt(T0 + 1, [11, 12], 0, 20, fail_rank=1)
    b, t2 = attempt(t + 2, [21, 22], 1, 20, resumed=10)

    def compile_(t, pid, h, cache="miss", source="probe"):
        return ev.CompileFinished(t=t, source=source, duration_s=30.0, pid=pid, step=0, graph_hash=h, cache=cache)

    first = [compile_(T0 + 1.5, 11, "g1"), compile_(T0 + 1.6, 11, "g2")]
    again = [compile_(t + 2.5, 21, "g1"), compile_(t + 2.6, 21, "g2"), compile_(t + 2.7, 21, "g3")]
    g = goodput(reduced(a + first + b + again))
    assert g.recompile is not None and g.recompile.startswith("a restart recompiled 2 graphs for 60.0 s")  # g3 is new
    hit = [compile_(t + 2.5, 21, "g1", cache="hit"), compile_(t + 2.6, 21, "g2", cache="hit")]
    assert goodput(reduced(a + first + b + hit)).recompile is None  # the cache served the restart
