"""The ranks of a job as the views show them: how many, the slowest step, the rank that failed first,
and the comparison of the ranks (the stragglers, each rank's level before the gradient sync, a row of
figures per rank). Comparing the ranks reads every rank step by step (20-60 ms with 32 ranks): it is
done again at most every COMPARE_EVERY_S while the run goes on, and once more at its end."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.reduce.ranks import FailedRank, RankLevel, Straggler
from neurondesk.core.reduce.state import RunState

COMPARE_EVERY_S = 3.5  # under 4 s: the Ranks panel, drawn every 4th frame (a second apart), sees a fresh one


@dataclass(frozen=True)
class RankRow:
    rank: int
    pid: int
    steps: int
    step_time_s: float | None
    presync_s: float | None
    data_wait_fraction: float | None
    samples_per_s: float | None


@dataclass(frozen=True)
class RankComparison:
    at: float  # the clock reading it was made at
    finished: bool
    world: int
    stragglers: tuple[Straggler, ...]  # the worst first
    levels: tuple[RankLevel, ...]  # by rank
    median_presync_s: float | None
    rows: tuple[RankRow, ...]  # by rank


@dataclass(frozen=True)
class RanksView:
    world: int
    job_step_time_s: float | None  # the slowest rank's steady step time
    failed_first: FailedRank | None
    failed_ranks: frozenset[int | None]
    comparison: RankComparison | None  # None for one process
    attempt: int = 0  # the attempt these ranks are (core/reduce/attempts.py); the attempts before it: restarts
    restarts: int = 0


def _compare(state: RunState, now: float) -> RankComparison:
    ranks = state.parts.ranks
    stragglers = ranks.stragglers()
    rows = tuple(RankRow(r.rank, r.pid, r.steps, r.step_time_s, r.presync_s, r.data_wait_fraction, r.samples_per_s)
                 for r in ranks.by_rank())
    return RankComparison(now, state.finished, ranks.world, tuple(stragglers), tuple(ranks.presync_levels(stragglers)),
                          ranks.median_presync_s, rows)


def _comparison(state: RunState, now: float, last: RankComparison | None) -> RankComparison | None:
    world = state.parts.ranks.world
    if world < 2:
        return None
    if (last is not None and last.world == world and last.finished == state.finished
            and last.at <= now < last.at + COMPARE_EVERY_S):
        return last
    return _compare(state, now)


def ranks_view(state: RunState, now: float, previous: RanksView | None = None) -> RanksView:
    """``previous`` (the last frame's): its comparison is kept for COMPARE_EVERY_S."""
    ranks = state.parts.ranks
    return RanksView(ranks.world, ranks.job_step_time_s, ranks.failed_first,
                     frozenset(f.rank for f in ranks.failures),
                     _comparison(state, now, previous.comparison if previous is not None else None),
                     state.parts.attempts.number, state.parts.attempts.restarts)
