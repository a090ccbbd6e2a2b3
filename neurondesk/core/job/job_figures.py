"""The figures of a job of many nodes, from each node's own figures. Pure.

The same rules as one node (core/figures/run_figures.py, core/figures/cost.py): the job goes at its slowest node's pace, so
its steady step time is the slowest node's and every price per step uses it; its price is the sum of
its nodes' (each node's own instance type and price); its cost so far is the sum of each node's cost so
far; samples/s and tokens/s sum over the nodes (None unless every node knows its own).

Compiles: the ranks of a job meet at every collective, so while one node compiles a graph the others
wait for it. The job's compile wall is therefore the slowest node's compile time, not the sum and not
the node's own: a node whose cache was warm compiled for seconds and waited for minutes. ``compile_wait_s``
is the node-seconds spent waiting for another node's compile; the compile share and its cost count it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from neurondesk.core.figures.cost import (
    compile_share,
    cost_so_far,
    per_1k_steps_all_in,
    per_1k_steps_steady,
    per_million_tokens,
    projected_cost,
)


class NodeFigures(msgspec.Struct, frozen=True, kw_only=True):
    """One node's inputs (from its RunFigures: its summary, or its series in Prometheus)."""

    node: str
    elapsed_s: float
    steps: int
    price_per_hour: float | None = None
    total_usd: float | None = None  # None: computed from price and elapsed
    step_time_s: float | None = None  # the node's steady step time (its slowest rank's)
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    compile_total_s: float = 0.0  # this node's own compile time (a compile in progress counted so far)
    model_flops_per_s: float | None = None
    peak_flops_per_s: float | None = None
    steps_requested: int | None = None


class JobFigures(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    elapsed_s: float
    steps: int  # steps every node has ended
    step_time_s: float | None
    steps_per_hour: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    price_per_hour: float | None  # None when no node has a price
    priced_nodes: int  # nodes with a price (the sums above cover only these)
    total_usd: float | None
    per_1k_steps_steady_usd: float | None
    per_1k_steps_all_in_usd: float | None
    per_million_tokens_usd: float | None
    projected_usd: float | None
    compile_wall_s: float  # the slowest node's compile time: what the job waited
    compile_wait_s: float  # node-seconds spent waiting for another node's compile
    compile_share: float | None  # the compile wall over the job's wall time
    compile_usd: float | None  # what the compile wall cost the whole job
    mfu: float | None  # model FLOP/s over peak FLOP/s, summed over every device of the job


def _sum(values: list[float | None], every: bool = False) -> float | None:
    known = [v for v in values if v is not None]
    if not known or (every and len(known) < len(values)):
        return None
    return sum(known)


def job_figures(nodes: Sequence[NodeFigures]) -> JobFigures:
    elapsed = max((n.elapsed_s for n in nodes), default=0.0)
    steps = min((n.steps for n in nodes), default=0)
    times = [n.step_time_s for n in nodes if n.step_time_s is not None]
    step_time = max(times) if times else None
    price = _sum([n.price_per_hour for n in nodes])
    total = _sum([n.total_usd if n.total_usd is not None else cost_so_far(n.price_per_hour, n.elapsed_s)
                  for n in nodes])
    tokens = _sum([n.tokens_per_s for n in nodes], every=True)
    wall = max((n.compile_total_s for n in nodes), default=0.0)
    requested = max((n.steps_requested for n in nodes if n.steps_requested is not None), default=None)
    model, peak = _sum([n.model_flops_per_s for n in nodes], every=True), _sum(
        [n.peak_flops_per_s for n in nodes], every=True)
    return JobFigures(
        nodes=len(nodes), elapsed_s=elapsed, steps=steps, step_time_s=step_time,
        steps_per_hour=3600.0 / step_time if step_time else None,
        samples_per_s=_sum([n.samples_per_s for n in nodes], every=True), tokens_per_s=tokens,
        price_per_hour=price, priced_nodes=sum(n.price_per_hour is not None for n in nodes), total_usd=total,
        per_1k_steps_steady_usd=per_1k_steps_steady(price, step_time),
        per_1k_steps_all_in_usd=per_1k_steps_all_in(total, steps),
        per_million_tokens_usd=per_million_tokens(price, tokens),
        projected_usd=projected_cost(price, elapsed, steps, requested, step_time),
        compile_wall_s=wall, compile_wait_s=sum(wall - n.compile_total_s for n in nodes),
        compile_share=compile_share(wall, elapsed), compile_usd=cost_so_far(price, wall),
        mfu=model / peak if model is not None and peak else None)
