"""The checkpoint interval that loses least, for the observed save cost and failure rate. Pure.

Young/Daly: with a save costing ``δ`` seconds and a mean time between failures ``M``, the interval
that minimises the expected loss (the saves' own time, plus the work redone after a failure: half an
interval on average) is about ``sqrt(2 δ M)``; the loss at interval ``τ`` is about ``δ/τ + τ/(2M)`` of
the job. The failure rate is this job's own: its disruptions (core/reduce/checkpoints.py: process
failures, those within a minute of one another as one) over its wall time, and never fewer than its
restarts: a crash loop restarting every 3 s is one chain of failures to the checkpoint reducer's minute,
but each restart redid the work since the last save. Said when the run's own
interval (the mean time between its saves' starts) is off by more than OFF_BY from it; with no failure
seen there is no rate to base it on, and nothing is said.
"""

from __future__ import annotations

import math

import msgspec

from neurondesk.core.reduce.checkpoints import CheckpointReducer

OFF_BY = 2.0  # the run's interval is said when it is more than this factor from Young/Daly's


class CheckpointAdvice(msgspec.Struct, frozen=True, kw_only=True):
    """Young/Daly's interval beside the run's, with what each loses (fractions of the job's time)."""

    save_cost_s: float  # the mean job seconds of one save
    failures: int  # disruptions seen in this job
    mtbf_s: float  # the job's wall time over its failures
    interval_s: float  # the run's: the mean time from one save's start to the next
    best_interval_s: float  # sqrt(2 x save cost x MTBF)
    loss_now: float  # expected share of the job lost at the run's interval (saves + work redone)
    loss_best: float  # ... at Young/Daly's
    off: bool  # the run's interval is more than OFF_BY from Young/Daly's
    words: str


def young_daly_s(save_cost_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * save_cost_s * mtbf_s)


def expected_loss(interval_s: float, save_cost_s: float, mtbf_s: float) -> float:
    """First-order share of the job lost: the saves' own time, and half an interval redone a failure."""
    return save_cost_s / interval_s + interval_s / (2.0 * mtbf_s)


def _dur(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.0f} ms"  # a small save is milliseconds, never "0.0 s"
    if s < 120:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def checkpoint_advice(ckpt: CheckpointReducer, elapsed_s: float, restarts: int = 0) -> CheckpointAdvice | None:
    """None: no failure seen, fewer than two saves, or nothing to measure an interval on. ``restarts``:
    the job's restarts (core/reduce/attempts.py), each one failure at least."""
    interval = ckpt.interval_s
    failures = max(ckpt.failures, restarts)
    if failures < 1 or ckpt.saves < 2 or interval is None or interval <= 0 or elapsed_s <= 0:
        return None
    cost = ckpt.save_s / ckpt.saves  # a job checkpoint's mean blocking seconds
    if cost <= 0:
        return None
    mtbf = elapsed_s / failures
    best = young_daly_s(cost, mtbf)
    off = interval > OFF_BY * best or interval * OFF_BY < best
    now, at_best = expected_loss(interval, cost, mtbf), expected_loss(best, cost, mtbf)
    fails = f"{failures} failure{'s' if failures != 1 else ''} in {_dur(elapsed_s)}"
    words = (f"checkpoints every {_dur(interval)} ({_dur(cost)} each) with {fails} (MTBF {_dur(mtbf)}): "
             f"Young/Daly's interval is sqrt(2 x {_dur(cost)} x {_dur(mtbf)}) = {_dur(best)}")
    if off:
        more = "more" if interval > best else "less"
        words += (f"; checkpoint {more} often, about every {_dur(best)}: the saves and the work redone after a "
                  f"failure would cost about {at_best * 100:.0f}% of the job instead of {now * 100:.0f}%")
    return CheckpointAdvice(save_cost_s=round(cost, 6), failures=failures, mtbf_s=round(mtbf, 3),
                            interval_s=round(interval, 3), best_interval_s=round(best, 3), loss_now=round(now, 6),
                            loss_best=round(at_best, 6), off=off, words=words)
