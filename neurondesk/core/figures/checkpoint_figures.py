"""The run's checkpoint figures (core/reduce/checkpoints.py), for RunFigures. Pure.

Seconds are the job's (a save on several ranks at once counts once); bytes are every rank's own
files; the rate is those bytes over the job seconds of the saves that said their size. The last
checkpoint is the last good one: "step 100, 2 min ago" (its age at the figures' clock reading).
"""

from __future__ import annotations

import msgspec

from neurondesk.core.findings.checkpoint_advice import CheckpointAdvice, checkpoint_advice
from neurondesk.core.node.units import size_text
from neurondesk.core.reduce.checkpoints import CheckpointReducer


class CheckpointFigures(msgspec.Struct, frozen=True, kw_only=True):
    saves: int = 0
    save_s: float | None = None  # None: no save seen
    load_s: float | None = None  # None: no load seen
    wait_s: float = 0.0  # job seconds the other ranks waited for the saves (each checkpoint's longest wait, summed)
    bytes: int | None = None
    write_rate: float | None = None  # bytes a second
    failed: int = 0  # saves and loads that raised
    last_step: int | None = None
    last_t: float | None = None
    last: str | None = None  # "step 100, 2 min ago"
    words: str | None = None  # "3 saves, 2.1 s, 45.0 MiB at 21.0 MiB/s; the other ranks waited 1.9 s; 1 load, 0.4 s"
    interval_s: float | None = None
    advice: CheckpointAdvice | None = None


def age_text(s: float) -> str:
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f} s ago"
    if s < 5400:
        return f"{s / 60:.0f} min ago"
    return f"{s / 3600:.1f} h ago"


def checkpoint_figures(ck: CheckpointReducer, elapsed_s: float, clock: float | None,
                       restarts: int = 0) -> CheckpointFigures:
    """``clock``: the figures' time (the last last event's, or now) for the last checkpoint's age;
    ``restarts``: the job's (the advice counts each one a failure)."""
    if not ck.rank_saves and not ck.rank_loads:
        return CheckpointFigures(advice=checkpoint_advice(ck, elapsed_s, restarts))
    last = None
    if ck.last_save_step is not None and ck.last_save_t is not None:
        last = f"step {ck.last_save_step}"
        if clock is not None:
            last += f", {age_text(clock - ck.last_save_t)}"
    parts = []
    if ck.rank_saves:
        part = f"{ck.saves} save{'s' if ck.saves != 1 else ''}, {ck.save_s:.2f} s"
        if ck.bytes_written:
            part += f", {size_text(ck.bytes_written)}"
            if ck.write_rate is not None:
                part += f" at {size_text(int(ck.write_rate))}/s"
        if ck.wait_s > 0:
            part += f"; the other ranks waited {ck.wait_s:.2f} s"
        parts.append(part)
    if ck.rank_loads:
        parts.append(f"{ck.loads} load{'s' if ck.loads != 1 else ''}, {ck.load_s:.2f} s")
    failed = ck.failed_saves + ck.failed_loads
    if failed:
        parts.append(f"{failed} failed ({ck.last_error or 'error'})"[:200])
    return CheckpointFigures(
        saves=ck.saves,
        save_s=round(ck.save_s, 6) if ck.rank_saves else None,
        load_s=round(ck.load_s, 6) if ck.rank_loads else None,
        wait_s=round(ck.wait_s, 6),
        bytes=ck.bytes_written if ck.rank_saves else None,
        write_rate=ck.write_rate,
        failed=failed,
        last_step=ck.last_save_step,
        last_t=ck.last_save_t,
        last=last,
        words="; ".join(parts),
        interval_s=ck.interval_s,
        advice=checkpoint_advice(ck, elapsed_s, restarts),
    )
