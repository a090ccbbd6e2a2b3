"""Which rank holds a job back, where in its step, and who waits for it; or, when no rank does, whether the
collective itself is slow. Pure: read from every rank's figures (core/job/fleet.py's RankRow), live from
Prometheus or merged from run folders.

With synchronising collectives every rank's step lasts as long as the slowest one's, so ranks are
compared on their **own time**: the steady step less the time spent inside collectives
(core/reduce/ranks.py). A rank whose own time is above the median of the other nodes' ranks by
max(10%, 2 ms) is the culprit, with the ranks of its node that are above it too; the victims are the
ranks whose own time is normal and that wait inside collectives for at least half of the culprit's
excess. Where the culprit spends its extra time:

- ``data``: its data wait explains at least half of the excess (before the forward);
- ``forward``: its time before the backward (pre-sync: data wait and forward) does;
- ``after-backward``: neither: from its backward to the collective (a hand-written all_reduce after
  gradient clipping or logging that synchronises, a slow backward).

Where collectives cannot be timed (XLA: every rank's collective phase is 0) own time is the step
itself, the same everywhere: ranks are compared on their pre-sync time instead, as before.

No culprit, yet ranks wait most of their step inside collectives: the collective is slow. A node whose
ranks' collective time is above the others' by the same margin is named (its link); else the network.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.job.fleet import RankRow
from neurondesk.core.reduce.ranks import STRAGGLER_ABS_S, STRAGGLER_REL, median

COLLECTIVE_BOUND = 0.5  # share of the step spent waiting in the collective, with no slow rank


@dataclass(frozen=True)
class SlowRank:
    node: str
    rank: int
    presync_s: float | None
    median_presync_s: float | None  # the other ranks' median
    step_time_s: float | None  # the job's median step
    victims: int  # the ranks that wait for it
    measure: str = "presync"  # "own" (step less collective wait) | "presync" (collectives not timed)
    own_s: float | None = None  # its own time a step
    median_own_s: float | None = None  # the other nodes' ranks' median own time
    node_ranks: tuple[int, ...] = ()  # the ranks of its node above the median too (itself among them)
    place: str | None = None  # "data" | "forward" | "after-backward"
    victim_nodes: tuple[str, ...] = ()
    victim_wait_s: float | None = None  # the victims' median time inside collectives a step

    @property
    def time_s(self) -> float:
        return (self.own_s if self.measure == "own" else self.presync_s) or 0.0

    @property
    def median_s(self) -> float:
        return (self.median_own_s if self.measure == "own" else self.median_presync_s) or 0.0

    @property
    def slower(self) -> float:
        return self.time_s / self.median_s - 1 if self.median_s > 0 else float("inf")


@dataclass(frozen=True)
class SlowCollective:
    """No rank computes longer, yet the ranks wait most of their step inside collectives."""

    own_s: float | None  # the median rank's own time a step (None: collectives not timed)
    wait_s: float  # the median rank's time inside collectives a step
    share: float  # of the median step
    node: str | None = None  # the node whose ranks' collectives are slower than the others' (its link)
    node_wait_s: float | None = None
    others_wait_s: float | None = None


def _over(x: float, base: float) -> bool:
    return x - base > max(STRAGGLER_REL * base, STRAGGLER_ABS_S)


def collectives_timed(ranks: list[RankRow]) -> bool:
    """Every rank's step is split (own time known) and some rank spent time inside collectives."""
    timed = [k for k in ranks if k.step_time_s is not None]
    return len(timed) >= 2 and all(k.own_s is not None for k in timed) and any(k.collective_s for k in timed)


def _base(ranks: list[RankRow], worst: RankRow, value) -> float | None:
    """The median of ``value`` over the ranks of the other nodes (the other ranks where all share one node)."""
    others = [k for k in ranks if k.node != worst.node] or [k for k in ranks if k is not worst]
    return median(v for v in map(value, others) if v is not None)


def _place(worst: RankRow, ranks: list[RankRow], excess: float) -> str:
    wait_base = _base(ranks, worst, lambda k: k.data_wait_s)
    if worst.data_wait_s is not None and wait_base is not None and worst.data_wait_s - wait_base >= excess / 2:
        return "data"
    pre_base = _base(ranks, worst, lambda k: k.presync_s)
    if worst.presync_s is not None and pre_base is not None and worst.presync_s - pre_base >= excess / 2:
        return "forward"
    return "after-backward"


def culprit(ranks: list[RankRow]) -> SlowRank | None:
    """The rank that holds the job back (own time, else pre-sync time, above the others' median by
    max(10%, 2 ms)), or None."""
    if collectives_timed(ranks):
        return _by_own_time([k for k in ranks if k.own_s is not None])
    return _by_presync(ranks)


def _by_own_time(known: list[RankRow]) -> SlowRank | None:
    worst = max(known, key=lambda k: (k.own_s, -k.rank))
    base = _base(known, worst, lambda k: k.own_s)
    if base is None or not _over(worst.own_s, base):
        return None
    excess = worst.own_s - base
    node_ranks = tuple(sorted(k.rank for k in known if k.node == worst.node and _over(k.own_s, base)))
    victims = [k for k in known if not _over(k.own_s, base) and (k.collective_s or 0.0) >= excess / 2]
    step = median(k.step_time_s for k in known if k.step_time_s is not None)
    return SlowRank(worst.node, worst.rank, worst.presync_s, _base(known, worst, lambda k: k.presync_s), step,
                    victims=len(victims), measure="own", own_s=worst.own_s, median_own_s=base,
                    node_ranks=node_ranks, place=_place(worst, known, excess),
                    victim_nodes=tuple(sorted({k.node for k in victims})),
                    victim_wait_s=median(k.collective_s for k in victims))


def _by_presync(ranks: list[RankRow]) -> SlowRank | None:
    known = [k for k in ranks if k.presync_s is not None]
    if len(known) < 2:
        return None
    worst = max(known, key=lambda k: (k.presync_s, -k.rank))
    base = median(k.presync_s for k in known if k is not worst)
    if base is None or not _over(worst.presync_s, base):
        return None
    step = median(k.step_time_s for k in known if k.step_time_s is not None)
    return SlowRank(worst.node, worst.rank, worst.presync_s, base, step, victims=len(ranks) - 1,
                    node_ranks=(worst.rank,), place="data" if _data_explains(worst, known, worst.presync_s - base)
                    else "forward")


def _data_explains(worst: RankRow, known: list[RankRow], excess: float) -> bool:
    base = median(k.data_wait_s for k in known if k is not worst and k.data_wait_s is not None)
    return worst.data_wait_s is not None and base is not None and worst.data_wait_s - base >= excess / 2


def wait_share(ranks: list[RankRow]) -> float | None:
    """The median rank's share of its step spent waiting for the others (RankRow.wait_s)."""
    return median(k.wait_s / k.step_time_s for k in ranks if k.wait_s is not None and k.step_time_s)


def slow_collective(ranks: list[RankRow], slow: SlowRank | None) -> SlowCollective | None:
    """No culprit and the median rank waits COLLECTIVE_BOUND of its step or more in the collective."""
    share = wait_share(ranks)
    if slow is not None or share is None or share < COLLECTIVE_BOUND:
        return None
    timed = collectives_timed(ranks)
    waits = [k.wait_s for k in ranks if k.wait_s is not None]
    found = SlowCollective(own_s=median(k.own_s for k in ranks if k.own_s is not None) if timed else None,
                           wait_s=median(waits) or 0.0, share=share)
    by_node: dict[str, list[float]] = {}
    for k in ranks:
        if k.wait_s is not None:
            by_node.setdefault(k.node, []).append(k.wait_s)
    if len(by_node) < 2:
        return found
    node_wait = {node: median(ws) for node, ws in by_node.items()}
    node = max(node_wait, key=lambda n: (node_wait[n], n))
    others = median(w for n, ws in by_node.items() if n != node for w in ws)
    if others is None or not _over(node_wait[node], others):
        return found
    return SlowCollective(found.own_s, found.wait_s, share, node=node, node_wait_s=node_wait[node],
                          others_wait_s=others)
