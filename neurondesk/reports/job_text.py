"""A job of many nodes in words and as JSON (core/job/job_view.py's JobView): fleet's screen, `fleet --once`,
and a console given `--prometheus` all say the same lines."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import msgspec

from neurondesk.core.job.fleet import FleetRow
from neurondesk.core.job.job_figures import JobFigures
from neurondesk.core.job.job_view import JobView
from neurondesk.reports.fmt import clock, pct, rate, secs, usd


def _at(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def slow_line(v: JobView) -> str | None:
    return None if v.slowest is None else slow_words(v.slowest, len(v.ranks))


PLACE_WORDS = {"data": "waiting for its data, before the forward", "forward": "before its backward (forward)",
               "after-backward": "from its backward to the collective"}


def _names(xs) -> str:
    return ", ".join(map(str, xs))


def slow_words(s, ranks: int) -> str:
    """``s``: a slow rank (core/job/culprit.SlowRank, or the job summary's): the culprit, where its time
    goes, and its victims: "node trn-01 (ranks 2, 3): 31 ms own time a step vs 10 ms on trn-00 (+210%),
    from its backward to the collective; trn-00 (2 rank(s)) waits 21 ms a step in collectives for it"."""
    who = f"node {s.node} ({_ranks(tuple(s.node_ranks) or (s.rank,))})"
    if s.measure != "own":
        return (f"{who} is {s.slower:.0%} slower than the job's median before the sync "
                f"({secs(s.presync_s, 2)} vs {secs(s.median_presync_s, 2)} of a {secs(s.step_time_s, 2)} step"
                f"{', waiting for its data' if s.place == 'data' else ''}); the other {ranks - 1} rank(s) wait for it")
    others = f"on {_names(s.victim_nodes)}" if 0 < len(s.victim_nodes) <= 3 else "on the other nodes"
    line = (f"{who}: {secs(s.own_s, 2)} own time a step vs {secs(s.median_own_s, 2)} {others} (+{s.slower:.0%}), "
            f"{PLACE_WORDS.get(s.place, 'in its step')}")
    if s.victims:
        waiters = _names(s.victim_nodes) if len(s.victim_nodes) <= 3 else f"{len(s.victim_nodes)} nodes"
        line += (f"; {waiters} ({s.victims} rank(s)) wait{'s' if len(s.victim_nodes) == 1 else ''} "
                 f"{secs(s.victim_wait_s, 2)} a step in collectives for it")
    return line


def slow_collective_line(v: JobView) -> str | None:
    """No rank computes longer, yet every rank waits in the collective: where it is slow."""
    if v.slow_collective is None or v.compiling:
        return None
    return slow_collective_words(v.slow_collective)


def slow_collective_words(c) -> str:
    """``c``: a slow collective (core/job/culprit.SlowCollective, or the job summary's): where the job's
    time goes when no rank computes longer; the live job view and the job summary say it in these words."""
    own = f" (own time {secs(c.own_s, 2)} a step, the median rank's)" if c.own_s is not None else ""
    head = (f"no rank is slower than the others{own}, yet ranks wait {pct(c.share, 0)} of each step "
            f"({secs(c.wait_s, 2)}) in the collective")
    if c.node is not None:
        return (f"{head}: the collective is slower on node {c.node} ({secs(c.node_wait_s, 2)} a step vs "
                f"{secs(c.others_wait_s, 2)} on the others): the slow place is inside the collective, on "
                f"{c.node}'s link — see its health")
    return f"{head}: the network (EFA) or a node's link is slow — see each node's health"


def compile_lines(v: JobView) -> list[str]:
    out = []
    for c in v.compiling:
        graph = f"graph #{c.graph}" if c.graph is not None else "a graph"
        why = []
        if c.cache_misses:
            why.append(f"{c.cache_misses} cache miss(es) on it")
        if c.past_it:
            cached = f", {c.cached_past_it} of them from their cache" if c.cached_past_it else ""
            why.append(f"{c.past_it} node(s) already had it{cached}")
        reason = f" ({'; '.join(why)})" if why else ""
        waits = "; the job waits" if c.past_it else ""
        out.append(f"{c.node} compiling {graph} for {clock(c.for_s)}{reason}{waits}")
    return out


def failure_lines(v: JobView) -> list[str]:
    out = []
    if v.failed is not None:
        row, f = v.failed
        rank = f"rank {f.rank}" if f.rank is not None else "a rank"
        step = f" at step {f.step:,}" if f.step is not None else ""
        when = f" at {_at(f.t)}" if f.t is not None else ""
        last = f"; last stderr line: {f.last_line}" if f.last_line else ""
        out.append(f"failed first: {rank} on node {row.node}{when}{step}: {f.what}{last}")
    stuck = [r for r in v.nodes if r.blocked_collective is not None and not r.stale]
    which = "; ".join(_collective(r) for r in stuck)
    if v.blocked is not None:
        why = f": {which}" if which else " (no step since: waiting for the failed rank)"
        out.append(f"{v.blocked.ranks} rank(s) blocked in a collective since {_at(v.blocked.since_t)}{why}")
    elif stuck:  # a hang with no failure: the ranks' Flight Recorder dumps say where
        nodes = {r.node for r in stuck}
        lasts = [k.last_step_t for k in v.ranks if k.node in nodes and k.last_step_t is not None]
        since = f" since {_at(max(lasts))}" if lasts else ""
        out.append(f"{sum(len(r.blocked_collective.ranks) for r in stuck)} rank(s) blocked in a collective{since}: "
                   f"{which}")
    for r in v.stale:
        since = f" since {_at(r.last_update_t)}" if r.last_update_t is not None else ""
        out.append(f"node {r.node} stopped reporting{since} (STALE: its last values are shown)")
    return out


def _ranks(ns: tuple[int, ...]) -> str:
    return f"rank{'s' if len(ns) > 1 else ''} {', '.join(map(str, ns))}"


def _collective(r: FleetRow) -> str:
    """"gloo:all_reduce #412 of default_pg on trn-03 (ranks 0, 1); rank 5 never entered it (last: #411)"."""
    b = r.blocked_collective
    line = f"{b.op} #{b.seq} of {b.group} on {r.node}" + (f" ({_ranks(b.ranks)})" if b.ranks else "")
    if b.never_entered:
        lasts = ", ".join(f"#{n}" for n in sorted(set(b.last)))
        line += f"; {_ranks(b.never_entered)} never entered it" + (f" (last: {lasts})" if lasts else "")
    return line


def figures_line(v: JobView) -> str:
    return figures_words(v.figures, len(v.ranks))


def figures_words(f: JobFigures, ranks: int) -> str:
    priced = "" if f.priced_nodes == f.nodes else f" ({f.priced_nodes} of {f.nodes} nodes priced)"
    return (f"{f.nodes} node(s), {ranks} rank(s) · {usd(f.price_per_hour)}/hour{priced} · "
            f"cost so far {usd(f.total_usd)} · steady {rate(f.samples_per_s)} samples/s · "
            f"$/1k steps steady {usd(f.per_1k_steps_steady_usd)} · compile {pct(f.compile_share)} of the wall "
            f"({secs(f.compile_wall_s, 0)}, others waited {secs(f.compile_wait_s, 0)})")


def step_verdicts(v: JobView) -> dict[str, str]:
    """What bounds each reporting node's steady step (core/figures/phases.py's verdict), by node."""
    return {r.node: r.step_verdict for r in v.nodes if r.step_verdict and not r.stale}


def bound_line(v: JobView) -> str | None:
    """The nodes of one verdict together, the most common first:
    "steady step: collective-bound on trn-01, trn-02; input-bound on trn-03"."""
    by: dict[str, list[str]] = {}
    for node, verdict in step_verdicts(v).items():
        by.setdefault(verdict, []).append(node)
    if not by:
        return None
    groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return "steady step: " + "; ".join(f"{verdict} on {', '.join(sorted(nodes))}" for verdict, nodes in groups)


def job_lines(v: JobView) -> list[str]:
    """The job's state, worst first; a healthy job says so."""
    name = v.job_id or "(no job id)"
    lines = [f"job {name}: {figures_line(v)}"]
    lines += failure_lines(v)
    lines += compile_lines(v)
    slow = slow_line(v) or slow_collective_line(v)
    if slow:
        lines.append(slow)
    lines += [r.health for r in v.nodes if r.health and not r.stale]  # beside the slowness: a cause
    bound = bound_line(v)
    if bound:
        lines.append(bound)
    lines += [f"problem: {p}" for p in v.problems]
    if (v.healthy and not v.compiling and v.slowest is None and slow_collective_line(v) is None
            and not any(r.health for r in v.nodes)):
        lines.append("healthy: every node reporting, no slow rank, nothing failed")
    return lines


def _culprit_json(v: JobView) -> dict[str, Any] | None:
    """The rank that holds the job back, where its time goes and who waits for it (core/job/culprit.py)."""
    s = v.slowest
    if s is None:
        return None
    return {"node": s.node, "rank": s.rank, "ranks": list(s.node_ranks), "measure": s.measure, "place": s.place,
            "own_s": s.own_s, "median_own_s": s.median_own_s, "presync_s": s.presync_s,
            "median_presync_s": s.median_presync_s, "victims": s.victims, "victim_nodes": list(s.victim_nodes),
            "victim_wait_s": s.victim_wait_s}


def job_json(v: JobView) -> dict[str, Any]:
    """fleet --once --format json's ``job`` object."""
    failed = v.failed
    return {
        "job_id": v.job_id, "nodes": len(v.nodes), "ranks": len(v.ranks), "healthy": v.healthy,
        "slowest_node": v.slowest.node if v.slowest else None,
        "slowest_rank": v.slowest.rank if v.slowest else None,
        "slowest_vs_median": v.slowest.slower if v.slowest else None,
        "culprit": _culprit_json(v),
        "slow_collective": None if v.slow_collective is None else dataclasses.asdict(v.slow_collective),
        "compiling_nodes": [{"node": c.node, "graph": c.graph, "for_s": c.for_s, "nodes_past_it": c.past_it}
                            for c in v.compiling],
        "failed_node": failed[0].node if failed else None,
        "failed_rank": failed[1].rank if failed else None,
        "failure": None if failed is None else {"what": failed[1].what, "last_line": failed[1].last_line,
                                                "step": failed[1].step, "t": failed[1].t},
        "blocked_ranks": v.blocked.ranks if v.blocked else 0,
        "blocked_since": v.blocked.since_t if v.blocked else None,
        "blocked_collective": [{"node": r.node, "op": b.op, "seq": b.seq, "group": b.group, "state": b.state,
                                "ranks": list(b.ranks), "never_entered": list(b.never_entered), "last": list(b.last)}
                               for r in v.nodes if (b := r.blocked_collective) is not None and not r.stale],
        "stale_nodes": [r.node for r in v.stale],
        "step_verdicts": step_verdicts(v),
        "usd_per_hour": v.figures.price_per_hour,
        "steady_samples_per_s": v.figures.samples_per_s,
        "collective_wait_share": v.collective_wait,
        "figures": msgspec.to_builtins(v.figures),
        "problems": list(v.problems),
        "node_health": {r.node: r.health for r in v.nodes if r.health},
        "lines": job_lines(v),
    }
