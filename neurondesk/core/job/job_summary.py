"""One summary of a job of many nodes, from each node's run summary. Pure.

Each node of a job records its own run (its own folder, its own summary.json); after the job, the folders
are copied to one place (or sit on shared storage such as FSx) and merged here into a ``JobSummary``: who
the nodes and ranks were, the job's figures (core/job/job_figures.py: the same rules as one node, never a second
copy of the arithmetic), the rank that held the job back, or else the collective slow for everyone and the node
whose link it is slower on (core/job/culprit.py, the live job view's rules, across every rank of the job), the
node whose compile the others waited for, the first failure across nodes, and what does not fit
(nodes missing, a node rank given twice, precision differing between nodes) as problem lines.

The caller (sources/job_runs.py) checks the folders are one job's: another job's run is refused, never
mixed in. docs/job-summary.schema.json is generated from these structs (``job_summary_schema()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from neurondesk.core.figures.cost import compile_share_of_cost
from neurondesk.core.figures.goodput import Goodput
from neurondesk.core.figures.run_figures import RunFigures
from neurondesk.core.findings.run_end import RunEnd
from neurondesk.core.job.culprit import culprit, slow_collective, wait_share
from neurondesk.core.job.fleet import RankRow as FleetRank
from neurondesk.core.job.job_figures import JobFigures, NodeFigures, job_figures
from neurondesk.core.job.job_goodput import JobGoodput, job_goodput
from neurondesk.core.node.failure_cause import first_cause
from neurondesk.core.summary.types import SUMMARY_VERSION, Cost, Device, Loss, Steady, Summary

JOB_SUMMARY_VERSION = 1


class NodeRun(msgspec.Struct, frozen=True, kw_only=True):
    """One node's run, as the merge takes it: its summary, its folder, how it ended (core/findings/run_end.py)."""

    run_dir: str
    summary: Summary
    end: RunEnd | None = None
    started_t: float | None = None  # the run's start on its clock (epoch seconds)
    earlier: list[Summary] = []  # the node's earlier runs of the job (relaunches with the same job id), oldest first
    share: float = 1.0  # its part of its node's seconds: runs of one node that overlap in time split them


class JobNode(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    node_rank: int | None
    run_id: str | None
    run_dir: str
    started_at: str | None
    started_t: float | None  # the same, epoch seconds (the node's clock)
    elapsed_s: float | None
    finished: bool
    exit_code: int | None
    exit_signal: str | None
    instance_type: str | None
    price_per_hour: float | None
    total_usd: float | None
    precision: str | None
    steps: int
    step_time_s: float | None  # the node's steady step time (its slowest rank's median)
    samples_per_s: float | None
    compile_count: int
    compile_total_s: float
    first_compile_s: float | None
    cache_hits: int
    cache_misses: int
    ranks: list[int]  # the global ranks this node ran


class JobRank(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    rank: int
    steps: int
    step_time_s: float | None
    presync_s: float | None  # median time before the sync: compute and data wait
    wait_s: float | None  # waiting for the others: inside collectives (else the step after the pre-sync point)
    own_s: float | None = None  # the step less its wait inside collectives


class SlowRank(msgspec.Struct, frozen=True, kw_only=True):
    """core/job/culprit.py's SlowRank, as the job summary keeps it."""

    node: str
    rank: int
    presync_s: float | None
    median_presync_s: float | None
    step_time_s: float | None
    slower: float  # its own time (measure "own") or pre-sync time over the other ranks' median, minus 1
    victims: int
    measure: str = "presync"  # "own": step less collective wait | "presync": collectives not timed
    own_s: float | None = None
    median_own_s: float | None = None
    node_ranks: list[int] = []
    place: str | None = None  # "data" | "forward" | "after-backward"
    victim_nodes: list[str] = []
    victim_wait_s: float | None = None


class SlowCollective(msgspec.Struct, frozen=True, kw_only=True):
    """core/job/culprit.py's SlowCollective, as the job summary keeps it: no rank computes longer, yet the ranks
    wait most of their step inside collectives; ``node``: the node whose ranks' collectives are slower (its link)."""

    own_s: float | None  # the median rank's own time a step (None: collectives not timed)
    wait_s: float  # the median rank's time inside collectives a step
    share: float  # of the median step
    node: str | None = None
    node_wait_s: float | None = None
    others_wait_s: float | None = None


class JobFailure(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    rank: int | None
    what: str  # "RuntimeError: ...", "exit 1", "SIGKILL"
    at: str | None  # ISO time (the node's clock)
    t: float | None
    step: int | None
    last_line: str
    exit_code: int | None
    exit_signal: str | None


class JobSummary(msgspec.Struct, kw_only=True):
    job_summary_version: int
    job_id: str
    launcher: str | None
    nodes_expected: int | None  # what the launchers said
    world_size: int | None
    started_at: str | None  # the first node's start
    finished: bool  # every node's run ended
    exit_code: int | None  # the first failing node's, else 0 when every node ended with 0
    precision: str | None
    config: dict[str, Any] | None  # the lead node's (global rank 0)
    loss: Loss  # the lead node's
    lead_node: str | None
    nodes: list[JobNode]
    ranks: list[JobRank]
    figures: JobFigures
    slowest: SlowRank | None
    collective_wait: float | None  # the median rank's share of the step spent waiting in the collective
    slow_collective: SlowCollective | None = None  # no culprit, yet every rank waits in the collective
    compile_slowest_node: str | None  # whose compile the job waited for (None: no compile)
    first_failure: JobFailure | None
    problems: list[str] = []
    goodput: JobGoodput | None = None  # across the nodes: which node failed, what the restarts cost (core/job/job_goodput.py)

    def as_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


def _epoch(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else None
    except ValueError:
        return None


def _node(n: NodeRun) -> JobNode:
    s, job = n.summary, n.summary.job
    cache = [c.cache for c in s.compiles]
    f = s.figures
    return JobNode(
        node=job.node if job else (s.run_id or n.run_dir), node_rank=job.node_rank if job else None,
        run_id=s.run_id, run_dir=n.run_dir, started_at=s.started_at, started_t=n.started_t, elapsed_s=s.elapsed_s, finished=s.finished,
        exit_code=s.exit_code, exit_signal=s.exit_signal, instance_type=s.cost.instance_type,
        price_per_hour=s.cost.price_per_hour, total_usd=s.cost.total_usd, precision=s.precision, steps=s.steps,
        step_time_s=f.step_time_s if f else s.steady.step_time_s,
        samples_per_s=f.samples_per_s if f else s.steady.samples_per_s, compile_count=s.compile_count,
        compile_total_s=s.compile_total_s or 0.0, first_compile_s=s.first_compile_s,
        cache_hits=cache.count("hit"), cache_misses=cache.count("miss"),
        ranks=list(job.ranks) if job and job.ranks else sorted(r.rank for r in s.ranks if r.rank is not None))


def _figures(n: NodeRun) -> NodeFigures:
    s, f = n.summary, n.summary.figures
    return NodeFigures(
        node=_node(n).node, elapsed_s=s.elapsed_s or 0.0, steps=s.steps, price_per_hour=s.cost.price_per_hour,
        total_usd=s.cost.total_usd, step_time_s=f.step_time_s if f else s.steady.step_time_s,
        samples_per_s=f.samples_per_s if f else s.steady.samples_per_s,
        tokens_per_s=f.tokens_per_s if f else s.steady.tokens_per_s, compile_total_s=s.compile_total_s or 0.0,
        model_flops_per_s=f.model_flops_per_s if f else None, peak_flops_per_s=f.peak_flops_per_s if f else None,
        steps_requested=s.steps_requested)


def _ranks(n: NodeRun, node: JobNode) -> list[FleetRank]:
    """The node's ranks as the job view compares them; a node of one process is its one rank."""
    s = n.summary
    rows = [FleetRank(job_id="", node=node.node, run_id=s.run_id or "", rank=r.rank, presync_s=r.presync_s,
                      step_time_s=r.step_time_s, steps=r.steps, own_s=r.own_s, collective_s=r.collective_s,
                      data_wait_s=r.step_data_wait_s) for r in s.ranks if r.rank is not None]
    if not rows and node.ranks:  # one process: the summary lists no ranks, its steady figures are that rank's
        rows = [FleetRank(job_id="", node=node.node, run_id=s.run_id or "", rank=node.ranks[0],
                          presync_s=None, step_time_s=node.step_time_s, steps=s.steps)]
    return rows


def _failure(runs: Sequence[NodeRun], nodes: list[JobNode]) -> JobFailure | None:
    failed = [(n, node) for n, node in zip(runs, nodes, strict=True) if n.end is not None]
    # each node's time is its own clock's: a clock far off makes this order wrong (fleet measures the skew live);
    # a failure that says its peer went away is a consequence, not the cause (core/node/failure_cause.py)
    first = first_cause(failed, lambda x: x[0].end.failed_t, lambda x: x[0].end.what)
    if first is None:
        return None
    n, node = first
    end = n.end
    at = datetime.fromtimestamp(end.failed_t).astimezone().isoformat(timespec="seconds") if end.failed_t else None
    return JobFailure(node=node.node, rank=end.failed_rank, what=end.what, at=at, t=end.failed_t, step=end.step,
                      last_line=end.last_line, exit_code=node.exit_code, exit_signal=node.exit_signal)


def _problems(nodes: list[JobNode], runs: Sequence[NodeRun], expected: int | None) -> list[str]:
    out = []
    if expected is not None and len(nodes) < expected:
        out.append(f"{len(nodes)} of the job's {expected} nodes given: the others' run folders are missing "
                   "(copy them beside these, or name their folders); the figures cover these nodes only")
    by_rank: dict[int, str] = {}
    for node in nodes:
        if node.node_rank is None:
            continue
        if expected is not None and node.node_rank >= expected:
            out.append(f"node {node.node!r} says node rank {node.node_rank} of a job of {expected} node(s): "
                       "out of range (check the launcher's --node-rank / --nnodes)")
        if node.node_rank in by_rank:
            out.append(f"nodes {by_rank[node.node_rank]!r} and {node.node!r} both say node rank {node.node_rank}")
        by_rank.setdefault(node.node_rank, node.node)
    owner: dict[int, str] = {}
    for node in nodes:
        for r in node.ranks:
            if r in owner and owner[r] != node.node:
                out.append(f"global rank {r} ran on both {owner[r]!r} and {node.node!r}: were these one job?")
            owner.setdefault(r, node.node)
    precisions = {node.precision for node in nodes}
    if len(precisions) > 1:
        shown = ", ".join(f"{node.node} {node.precision or 'unknown'}" for node in nodes)
        out.append(f"precision differs between nodes ({shown})")
    worlds = {n.summary.job.world_size for n in runs if n.summary.job and n.summary.job.world_size}
    if len(worlds) > 1:
        out.append(f"the nodes disagree on the world size ({', '.join(map(str, sorted(worlds)))})")
    for n in runs:
        out += [f"node {_node(n).node!r}: {p}" for p in (n.summary.job.problems if n.summary.job else [])]
    return out


def _lead(runs: Sequence[NodeRun], nodes: list[JobNode]) -> int:
    """The node of global rank 0 (it logs the loss), else node rank 0, else the first."""
    for i, node in enumerate(nodes):
        if 0 in node.ranks:
            return i
    return next((i for i, node in enumerate(nodes) if node.node_rank == 0), 0)


def job_summary(runs: Sequence[NodeRun]) -> JobSummary:
    """``runs``: one job's node runs (at least one), in any order."""
    order = sorted(runs, key=lambda n: (_node(n).node_rank is None, _node(n).node_rank or 0, _node(n).node))
    nodes = [_node(n) for n in order]
    ids = [n.summary.job for n in order if n.summary.job]
    expected = max((j.nodes for j in ids if j.nodes), default=None)
    ranks = [r for n, node in zip(order, nodes, strict=True) for r in _ranks(n, node)]
    slow = culprit(ranks)
    coll = slow_collective(ranks, slow)
    figures = job_figures([_figures(n) for n in order])
    lead = _lead(order, nodes)
    failure = _failure(order, nodes)
    starts = [(t, s) for s in (n.started_at for n in nodes) if (t := _epoch(s)) is not None]
    codes = [node.exit_code for node in nodes]
    compile_node = max(nodes, key=lambda node: node.compile_total_s) if nodes else None
    return JobSummary(
        job_summary_version=JOB_SUMMARY_VERSION, job_id=ids[0].job_id if ids else "",
        launcher=next((j.launcher for j in ids if j.launcher), None), nodes_expected=expected,
        world_size=max((j.world_size for j in ids if j.world_size), default=None) or len(ranks) or None,
        started_at=min(starts)[1] if starts else None, finished=all(node.finished for node in nodes),
        exit_code=(failure.exit_code if failure and failure.exit_code is not None
                   else 0 if codes and all(c == 0 for c in codes) else None),
        precision=nodes[lead].precision if nodes else None, config=order[lead].summary.config if order else None,
        loss=order[lead].summary.loss if order else Loss(), lead_node=nodes[lead].node if nodes else None,
        nodes=nodes,
        ranks=[JobRank(node=r.node, rank=r.rank, steps=r.steps or 0, step_time_s=r.step_time_s,
                       presync_s=r.presync_s, wait_s=r.wait_s, own_s=r.own_s)
               for r in sorted(ranks, key=lambda r: r.rank)],
        figures=figures,
        slowest=None if slow is None else SlowRank(
            node=slow.node, rank=slow.rank, presync_s=slow.presync_s, median_presync_s=slow.median_presync_s,
            step_time_s=slow.step_time_s, slower=slow.slower, victims=slow.victims, measure=slow.measure,
            own_s=slow.own_s, median_own_s=slow.median_own_s, node_ranks=list(slow.node_ranks), place=slow.place,
            victim_nodes=list(slow.victim_nodes), victim_wait_s=slow.victim_wait_s),
        collective_wait=wait_share(ranks),
        slow_collective=None if coll is None else SlowCollective(
            own_s=coll.own_s, wait_s=coll.wait_s, share=coll.share, node=coll.node, node_wait_s=coll.node_wait_s,
            others_wait_s=coll.others_wait_s),
        compile_slowest_node=compile_node.node if compile_node and compile_node.compile_total_s > 0 else None,
        first_failure=failure, problems=_problems(nodes, order, expected),
        goodput=job_goodput([(node.node, [*(x.goodput for x in n.earlier), shared(n.summary.goodput, n.share)])
                             for n, node in zip(order, nodes, strict=True)]))


def shared(g: Goodput | None, share: float) -> Goodput | None:
    """A run's goodput seconds as its part of its node's (``NodeRun.share``): concurrent runs on one node
    bill the node's seconds once between them, so the job's node-seconds are not counted twice."""
    if g is None or share >= 1.0:
        return g
    return msgspec.structs.replace(g, productive_s=round(g.productive_s * share, 3), wall_s=round(g.wall_s * share, 3),
                                   badput={k: round(v * share, 3) for k, v in g.badput.items()})


class JobSummaryError(ValueError):
    """A file that is no job summary."""


def load_job_summary(data: bytes | str) -> JobSummary:
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise JobSummaryError(f"not JSON ({exc})") from exc
    if not isinstance(raw, dict) or raw.get("job_summary_version") != JOB_SUMMARY_VERSION:
        raise JobSummaryError(f"not a job summary of version {JOB_SUMMARY_VERSION} (no job_summary_version "
                              f"{JOB_SUMMARY_VERSION}): write one with `neurondesk job summary DIR... --format json`")
    try:
        return msgspec.convert(raw, JobSummary, strict=False)
    except msgspec.ValidationError as exc:
        raise JobSummaryError(f"a field has the wrong type ({exc})") from exc


def job_summary_schema() -> dict[str, Any]:
    schema = msgspec.json.schema(JobSummary)
    schema["title"] = "neurondesk job summary"
    schema["description"] = (f"`neurondesk job summary DIR... --format json`, job_summary_version {JOB_SUMMARY_VERSION}: "
                             "the per-node run summaries of one job merged")
    return schema


def as_run_summary(job: JobSummary) -> Summary:
    """The job in the shape of a run summary, for compare (core/rules/compare.py reads run summaries): the job's
    figures where a run has its own, the lead node's loss and configuration."""
    f = job.figures
    kinds = {n.instance_type for n in job.nodes}
    instance = kinds.pop() if len(kinds) == 1 else "mixed"
    # the job's first step waits for every node's first compile
    first = max((n.first_compile_s for n in job.nodes if n.first_compile_s is not None), default=None)
    compile_count = max((n.compile_count for n in job.nodes), default=0)
    name = f"job {job.job_id or '(no id)'}"
    return Summary(
        summary_version=SUMMARY_VERSION, run_id=name,
        command=[f"{name}: {f.nodes} node(s), {len(job.ranks)} rank(s)"],
        started_at=job.started_at, elapsed_s=f.elapsed_s, exit_code=job.exit_code,
        finished=job.finished, precision=job.precision, config=job.config, steps=f.steps,
        device=Device(kind=f"{f.nodes} node(s)", name=None), world_size=job.world_size or 1,
        steady=Steady(step_time_s=f.step_time_s, samples_per_s=f.samples_per_s, tokens_per_s=f.tokens_per_s),
        first_compile_s=first, compile_total_s=f.compile_wall_s, compile_count=compile_count,
        loss=job.loss,
        cost=Cost(instance_type=f"{f.nodes} x {instance or '?'}", price_per_hour=f.price_per_hour,
                  price_source="sum of the nodes' prices", total_usd=f.total_usd,
                  per_1k_steps_steady_usd=f.per_1k_steps_steady_usd, per_1k_steps_all_in_usd=f.per_1k_steps_all_in_usd,
                  per_million_tokens_usd=f.per_million_tokens_usd,
                  compile_share=compile_share_of_cost(f.price_per_hour, f.compile_wall_s, f.elapsed_s),
                  projected_usd=f.projected_usd),
        mfu=f.mfu, figures=_as_run_figures(f, first, compile_count),
    )


def _as_run_figures(f: JobFigures, first_compile_s: float | None, compile_count: int) -> RunFigures:
    """The job's figures as a run's (what compare's figure rows read); a figure the job has no value of is
    None, a count it does not keep 0."""
    return RunFigures(
        at_t=None, elapsed_s=f.elapsed_s, steps=f.steps, steps_requested=None, steady_steps=0,
        step_time_s=f.step_time_s, step_time_p90_s=None, samples_per_s=f.samples_per_s, tokens_per_s=f.tokens_per_s,
        steps_per_hour=f.steps_per_hour, data_wait_fraction=None, compile_count=compile_count,
        compile_total_s=f.compile_wall_s, first_compile_s=first_compile_s, recompiles_after_warmup=0,
        compile_share=f.compile_share,
        compile_share_of_cost=compile_share_of_cost(f.price_per_hour, f.compile_wall_s, f.elapsed_s),
        price_per_hour=f.price_per_hour, total_usd=f.total_usd,
        per_1k_steps_steady_usd=f.per_1k_steps_steady_usd, per_1k_steps_all_in_usd=f.per_1k_steps_all_in_usd,
        per_million_tokens_usd=f.per_million_tokens_usd, projected_usd=f.projected_usd, to_target_usd=None,
        mfu=f.mfu, hfu=None, mfu_note=None, model_flops_per_s=None, hardware_flops_per_s=None, peak_flops_per_s=None)
