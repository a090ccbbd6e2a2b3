"""The series a job of many nodes is assembled from (core/job/job_view.py reads them back through
Prometheus): who this node is in the job, each rank's steps and last step, the compile in progress
(which graph, and what the cache said of the finished ones), how the run ended, and the collective
its ranks are blocked in (Flight Recorder, read at a hang: recorder/flight_desk.py): one info series
while blocked, none otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from neurondesk.core.findings.run_end import RunEnd, first_failure
from neurondesk.core.node.flight_recorder import BlockedCollective, blocked_now
from neurondesk.core.reduce.state import RunState

LABELS = ("job_id", "node", "run_id")


@dataclass(frozen=True)
class JobSeries:
    compile_graph: int | None  # the number of the graph being compiled (compiles done + 1); None: none
    cache: tuple[tuple[str, int], ...]  # ("hit" | "miss" | "failed", finished compiles)
    failure: RunEnd | None
    finished: bool
    exit_code: int | None
    blocked: BlockedCollective | None = None


def job_series(state: RunState, offset: float, compiling: bool) -> JobSeries:
    counts: dict[str, int] = {}
    for c in state.compiles:
        if c.cache:
            counts[c.cache] = counts.get(c.cache, 0) + 1
    return JobSeries(compile_graph=len(state.compiles) + 1 if compiling else None,
                     cache=tuple(sorted(counts.items())), failure=first_failure(state, offset),
                     finished=state.finished, exit_code=state.exit_code, blocked=blocked_now(state.flight()))


def job_families(s, ids: list[str]) -> Iterator[Metric]:
    """``s``: an exporter/snapshot.py Snapshot."""
    job = s.job
    info = InfoMetricFamily("neurondesk_job", "Who this node is in its job (core/events/job_identity.py)", labels=LABELS)
    if job is not None:
        info.add_metric(ids, {"node_rank": _text(job.node_rank), "nodes": _text(job.nodes),
                              "world_size": _text(job.world_size), "local_world_size": _text(job.local_world_size),
                              "launcher": job.launcher or "", "ranks": ",".join(map(str, job.ranks[:64]))})
    yield info
    steps = CounterMetricFamily("neurondesk_rank_steps", "Steps a rank has ended", labels=[*LABELS, "rank"])
    last = GaugeMetricFamily("neurondesk_rank_last_step_timestamp_seconds", "When a rank last ended a step",
                             labels=[*LABELS, "rank"])
    for r in s.ranks:
        steps.add_metric([*ids, str(r.rank)], r.steps)
        if r.last_step_t is not None:
            last.add_metric([*ids, str(r.rank)], r.last_step_t)
    yield steps
    yield last
    j: JobSeries = s.job_series
    graph = GaugeMetricFamily("neurondesk_compile_graph", "Number of the graph being compiled (absent: none)",
                              labels=LABELS)
    if j.compile_graph is not None:
        graph.add_metric(ids, j.compile_graph)
    yield graph
    cache = CounterMetricFamily("neurondesk_compile_cache", "Finished compiles by what the compile cache said",
                                labels=[*LABELS, "result"])
    for result, n in j.cache:
        cache.add_metric([*ids, result], n)
    yield cache
    yield from _end(j, ids)
    yield _blocked(j.blocked, ids)


def _blocked(b: BlockedCollective | None, ids: list[str]) -> Metric:
    info = InfoMetricFamily("neurondesk_blocked_collective", "The collective this node's ranks are blocked in, "
                            "from their Flight Recorder dumps at the hang (absent: none)", labels=LABELS)
    if b is not None:
        info.add_metric(ids, {"op": b.op[:64], "seq": str(b.seq), "group": b.group[:64], "state": b.state[:32],
                              "ranks": _list(b.ranks), "never_entered": _list(b.never_entered), "last": _list(b.last)})
    return info


def _list(ns: tuple[int, ...]) -> str:
    return ",".join(map(str, ns[:64]))


def _end(j: JobSeries, ids: list[str]) -> Iterator[Metric]:
    done = GaugeMetricFamily("neurondesk_run_finished", "1 once the workload has exited", labels=LABELS)
    done.add_metric(ids, 1 if j.finished else 0)
    yield done
    code = GaugeMetricFamily("neurondesk_exit_code", "The workload's exit code (absent while it runs)", labels=LABELS)
    if j.finished and j.exit_code is not None:
        code.add_metric(ids, j.exit_code)
    yield code
    f = j.failure
    when = GaugeMetricFamily("neurondesk_failure_timestamp_seconds", "When the first failure of this node came",
                             labels=LABELS)
    what = InfoMetricFamily("neurondesk_failure", "The first failure of this node", labels=LABELS)
    if f is not None:
        if f.failed_t is not None:
            when.add_metric(ids, f.failed_t)
        what.add_metric(ids, {"rank": _text(f.failed_rank), "what": f.what, "last_line": f.last_line,
                              "step": _text(f.step)})
    yield when
    yield what


def _text(x: int | None) -> str:
    return "" if x is None else str(x)
