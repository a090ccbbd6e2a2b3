"""A job's goodput across its nodes, from each node's goodput (core/figures/goodput.py): the productive and
badput seconds summed over the nodes (node-hours, as the bill counts them), the restarts the job had
(every node restarts with it: the most any node counted), and each node's disruptions, named by node,
so the job view says which node failed and what the restart cost the job. Pure."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from neurondesk.core.figures.goodput import KINDS, Disruption, Goodput


class NodeDisruption(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    disruption: Disruption


class JobGoodput(msgspec.Struct, frozen=True, kw_only=True):
    fraction: float | None  # productive node-seconds / wall node-seconds
    productive_s: float
    wall_s: float
    restarts: int
    steps_lost: int
    max_step: int
    badput: dict[str, float]  # node-seconds by kind
    disruptions: list[NodeDisruption] = []  # every node's, in time order (their clocks)
    restart_cost_s: float = 0.0  # wasted progress and recovery, node-seconds: what the restarts cost the job


def job_goodput(nodes: Sequence[tuple[str, Goodput | None]]) -> JobGoodput | None:
    """``nodes``: (node name, its goodput) for every node of the job; None when no node has one."""
    known = [(name, g) for name, g in nodes if g is not None]
    if not known:
        return None
    productive = sum(g.productive_s for _, g in known)
    wall = sum(g.wall_s for _, g in known)
    badput = {k: round(sum(g.badput.get(k, 0.0) for _, g in known), 3) for k in KINDS}
    found = [NodeDisruption(node=name, disruption=d) for name, g in known for d in g.disruptions]
    found.sort(key=lambda x: x.disruption.t if x.disruption.t is not None else float("inf"))
    return JobGoodput(
        fraction=round(productive / wall, 4) if wall > 0 else None, productive_s=round(productive, 3),
        wall_s=round(wall, 3), restarts=max(g.restarts for _, g in known),
        steps_lost=max(g.steps_lost for _, g in known), max_step=max(g.max_step for _, g in known),
        badput=badput, disruptions=found[:50],
        restart_cost_s=round(badput["wasted_progress"] + badput["restart_recovery"], 3))
