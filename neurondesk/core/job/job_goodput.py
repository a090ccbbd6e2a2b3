"""A job's goodput across its nodes and relaunches, from each run's goodput (core/figures/goodput.py): the
productive and badput seconds summed over every run of every node (node-hours, as the bill counts them),
the restarts the job had (every node restarts with it: the most any node counted, a relaunch of the job with
the same job id counting as one), the steps lost (a relaunch that resumed below the step its earlier run
reached lost the difference), and each run's disruptions named by node, so the job view says which node
failed and what the restarts cost the job. When one node fails, every node ends its attempt with it (the
others' ranks lose their peer first, and their word can be dated before the failed rank's): the disruptions
of one restart of the job are grouped, the cause first (core/node/failure_cause.py), the others naming it.
Pure.

The time between two relaunches (no recorder ran: the queue, the scheduler) is in no run's wall time and
so in none of the kinds."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from neurondesk.core.figures.goodput import KINDS, Disruption, Goodput
from neurondesk.core.node.failure_cause import first_cause


class NodeDisruption(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    disruption: Disruption
    with_node: str | None = None  # the node whose failure the job restarted for, this node's attempt ending with it


class JobGoodput(msgspec.Struct, frozen=True, kw_only=True):
    fraction: float | None  # productive node-seconds / wall node-seconds
    productive_s: float
    wall_s: float
    restarts: int
    steps_lost: int
    max_step: int
    badput: dict[str, float]  # node-seconds by kind
    disruptions: list[NodeDisruption] = []  # every node's, a restart's cause first, restarts in time order
    restart_cost_s: float = 0.0  # wasted progress and recovery, node-seconds: what the restarts cost the job
    relaunches: int = 0  # runs of a node before its latest (the same job id launched again)


def _node(runs: Sequence[Goodput]) -> tuple[int, int, int]:
    """(restarts, steps lost, relaunches) of one node's runs, oldest first."""
    restarts = sum(g.restarts for g in runs) + len(runs) - 1
    lost = sum(g.steps_lost for g in runs)
    lost += sum(max(0, before.max_step - after.first_step) for before, after in zip(runs, runs[1:], strict=False))
    return restarts, lost, len(runs) - 1


def job_goodput(nodes: Sequence[tuple[str, Sequence[Goodput | None]]]) -> JobGoodput | None:
    """``nodes``: (node name, the goodput of each of its runs of the job, oldest first); None when no run has one."""
    known = [(name, [g for g in runs if g is not None]) for name, runs in nodes]
    known = [(name, runs) for name, runs in known if runs]
    if not known:
        return None
    every = [g for _, runs in known for g in runs]
    productive = sum(g.productive_s for g in every)
    wall = sum(g.wall_s for g in every)
    badput = {k: round(sum(g.badput.get(k, 0.0) for g in every), 3) for k in KINDS}
    per_node = [_node(runs) for _, runs in known]
    found = _by_restart([NodeDisruption(node=name, disruption=d) for name, runs in known for g in runs
                         for d in g.disruptions])
    return JobGoodput(
        fraction=round(productive / wall, 4) if wall > 0 else None, productive_s=round(productive, 3),
        wall_s=round(wall, 3), restarts=max(r for r, _, _ in per_node), steps_lost=max(x for _, x, _ in per_node),
        max_step=max(g.max_step for g in every), badput=badput, disruptions=found[:50],
        restart_cost_s=round(badput["wasted_progress"] + badput["restart_recovery"], 3),
        relaunches=max(n for _, _, n in per_node))


def _by_restart(found: list[NodeDisruption]) -> list[NodeDisruption]:
    """The nodes' disruptions, those of one restart of the job together, its cause first and the others
    naming its node. A disruption is of the same restart as the one before it when it came before that
    one's attempt was running again (its failure time plus its recovery; no recovery: the job ended)."""
    inf = float("inf")
    groups: list[list[NodeDisruption]] = []
    until = -inf
    for x in sorted(found, key=lambda x: x.disruption.t if x.disruption.t is not None else inf):
        d = x.disruption
        if not groups or (d.t is not None and d.t > until):
            groups.append([])
            until = -inf
        groups[-1].append(x)
        if d.t is not None:
            until = max(until, d.t + d.recovery_s if d.recovery_s is not None else inf)
    out: list[NodeDisruption] = []
    for group in groups:
        cause = first_cause(group, lambda x: x.disruption.t, lambda x: x.disruption.cause)
        out.append(cause)
        out += [msgspec.structs.replace(x, with_node=cause.node if x.node != cause.node else None)
                for x in group if x is not cause]
    return out
