"""A job of many nodes, seen as one: which node and rank hold it back, which node is still compiling,
which failed first and who is blocked since, who went silent, and the job's figures. Pure.

Read from every node's series (clients/prometheus_api.py: ``FleetRead``). The rank that holds the job
back, where in its step, and who waits for it, or a collective slow for everyone: core/job/culprit.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from neurondesk.core.job.culprit import SlowCollective, SlowRank, culprit, slow_collective, wait_share
from neurondesk.core.job.fleet import FleetRead, FleetRow, NodeFailure, RankRow, node_figures
from neurondesk.core.job.job_figures import JobFigures, job_figures
from neurondesk.core.node.failure_cause import first_cause

BLOCKED_AFTER_S = 10.0  # no step for this long (and 3 steps' time) after a failure: blocked


@dataclass(frozen=True)
class CompileSkew:
    node: str
    graph: int | None
    for_s: float
    past_it: int  # nodes that have finished that graph and are not compiling
    cached_past_it: int  # of those, nodes whose compiles came from the cache at least once
    cache_misses: int | None  # this node's compiles that missed the cache so far


@dataclass(frozen=True)
class Blocked:
    ranks: int
    since_t: float  # their latest step (the failed node's clock is not theirs: each node's own)


@dataclass(frozen=True)
class JobView:
    job_id: str
    nodes: list[FleetRow]
    ranks: list[RankRow]
    figures: JobFigures
    slowest: SlowRank | None
    compiling: list[CompileSkew]
    failed: tuple[FleetRow, NodeFailure] | None
    blocked: Blocked | None
    stale: list[FleetRow]
    collective_wait: float | None  # the median rank's share of the step spent waiting in the collective
    problems: list[str] = field(default_factory=list)
    slow_collective: SlowCollective | None = None  # no culprit, yet every rank waits in the collective

    @property
    def healthy(self) -> bool:
        return not (self.failed or self.stale or self.problems or self.blocked
                    or any(r.blocked_collective is not None and not r.stale for r in self.nodes))


def _rows_of_job(read: FleetRead, job_id: str) -> list[FleetRow]:
    """The job's rows; a run whose job id came late (its first scrapes said '') is its later row."""
    named = {(r.node, r.run_id) for r in read.rows if r.job_id}
    return [r for r in read.rows if r.job_id == job_id and (job_id or (r.node, r.run_id) not in named)]


def pick_job(read: FleetRead, job: str | None) -> str | None:
    """The job to show: the one asked for, else the one with the most nodes reporting."""
    if job is not None:
        return job
    counts: dict[str, int] = {}
    for r in read.rows:
        counts[r.job_id] = counts.get(r.job_id, 0) + (not r.stale)
    return max(counts, key=lambda j: (counts[j], j != "", j), default=None)


def job_view(read: FleetRead, job_id: str) -> JobView:
    rows = _rows_of_job(read, job_id)
    keys = {(r.node, r.run_id) for r in rows}
    live_keys = {(r.node, r.run_id) for r in rows if not r.stale and not r.finished}
    ranks = [k for k in read.ranks if k.job_id == job_id and (k.node, k.run_id) in keys]
    problems = _problems(read, rows, job_id)
    now = read.now
    failed = _first_failure(rows)
    live_ranks = [k for k in ranks if (k.node, k.run_id) in live_keys]
    slowest = culprit(live_ranks)
    return JobView(job_id=job_id, nodes=rows, ranks=ranks, figures=job_figures([node_figures(r, now) for r in rows]),
                   slowest=slowest, compiling=_compiling(rows),
                   failed=failed, blocked=_blocked(live_ranks, rows, now) if failed else None,
                   stale=[r for r in rows if r.stale and not r.finished], collective_wait=wait_share(live_ranks),
                   problems=problems, slow_collective=slow_collective(live_ranks, slowest))




def _compiling(rows: list[FleetRow]) -> list[CompileSkew]:
    live = [r for r in rows if not r.stale and not r.finished]
    out = []
    for r in live:
        if r.compiling_for_s is None:
            continue
        graph = r.compile_graph
        past = [o for o in live if o is not r and o.compiling_for_s is None and graph is not None
                and (o.compiles or 0) >= graph]
        cached = sum(1 for o in past if (o.cache_hits or 0) > 0)
        out.append(CompileSkew(r.node, graph, max(0.0, r.compiling_for_s + r.skew_s), len(past), cached,
                               r.cache_misses))
    return sorted(out, key=lambda c: -c.for_s)


def _first_failure(rows: list[FleetRow]) -> tuple[FleetRow, NodeFailure] | None:
    failed = [(r, r.failure) for r in rows if r.failure is not None]
    # each node's time on its own clock, brought to Prometheus's by its measured skew; a failure that
    # says its peer went away is the dead rank's consequence, not the job's cause (core/node/failure_cause.py)
    return first_cause(failed, lambda rf: (rf[1].t - rf[0].skew_s) if rf[1].t is not None else None,
                       lambda rf: rf[1].what)


def _blocked(live_ranks: list[RankRow], rows: list[FleetRow], now: float) -> Blocked | None:
    """The ranks still running that have ended no step for a while: waiting in a collective for a dead peer."""
    skew = {(r.node, r.run_id): r.skew_s for r in rows}
    stuck = []
    for k in live_ranks:
        if k.last_step_t is None:
            continue
        quiet = now - (k.last_step_t - skew.get((k.node, k.run_id), 0.0))
        if quiet > max(BLOCKED_AFTER_S, 3 * (k.step_time_s or 0.0)):
            stuck.append(k.last_step_t - skew.get((k.node, k.run_id), 0.0))
    return Blocked(len(stuck), max(stuck)) if stuck else None


def _problems(read: FleetRead, rows: list[FleetRow], job_id: str) -> list[str]:
    out = []
    fresh = [r for r in rows if not r.stale]
    by_node: dict[str, list[FleetRow]] = {}
    for r in fresh:
        by_node.setdefault(r.node, []).append(r)
    for node, same in sorted(by_node.items()):
        if len(same) > 1:
            where = ", ".join(f"run {r.run_id} at {r.instance or '?'}" for r in same)
            out.append(f"node name {node!r} is reported by {len(same)} recorders ({where}): each is kept apart; "
                       "give each node its own --node")
    ranks_seen: dict[int, str] = {}
    for r in fresh:
        if r.node_rank is None:
            continue
        if r.nodes is not None and r.node_rank >= r.nodes:
            out.append(f"node {r.node!r} says node rank {r.node_rank} of a job of {r.nodes} node(s): out of range "
                       "(check the launcher's --node-rank / --nnodes)")
        if r.node_rank in ranks_seen and ranks_seen[r.node_rank] != r.node:
            out.append(f"nodes {ranks_seen[r.node_rank]!r} and {r.node!r} both say node rank {r.node_rank}")
        ranks_seen.setdefault(r.node_rank, r.node)
    expected = max((r.nodes for r in fresh if r.nodes is not None), default=None)
    if expected is not None and len({r.node for r in rows}) < expected:
        out.append(f"{len({r.node for r in rows})} of the job's {expected} nodes report: the others never reached "
                   "Prometheus (not started, not scraped, or another --job)")
    for r in fresh:
        if r.skew_s:
            side = "ahead of" if r.clock_skew_s > 0 else "behind"
            out.append(f"node {r.node!r}'s clock is {abs(r.clock_skew_s):.0f} s {side} Prometheus's: its times are "
                       "corrected by that; run chrony or another NTP client on it")
    for f in read.foreign:  # the reader keeps those scraped in the same Prometheus job as this job's nodes
        out.append(f"node {f.node!r} ({f.instance}) is scraped with this job but reports job id {f.job_id!r}, "
                   f"not {job_id!r}: left out of this job's figures (a stale --job, or another allocation?)")
    return out
