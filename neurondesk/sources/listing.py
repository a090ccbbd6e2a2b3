"""`ls`'s row of a live run without reducing a long journal: from the newest usable checkpoint
(sources/rebuild.py), else from the row the newest checkpoint's header keeps."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from neurondesk.sources.rebuild import state_from_run_dir
from neurondesk.store.checkpoint import best_checkpoint, checkpoint_files, read_listing
from neurondesk.store.checkpoint_header import Listing as HeaderListing
from neurondesk.store.rundir import RunPaths

LISTING_FULL_BYTES = 32 << 20  # a journal this small is reduced for `ls` when no checkpoint can be used


@dataclass(frozen=True)
class Listing:
    """A live run as `ls` shows it."""

    command: list[str]
    phase: str
    step: int
    steps_requested: int | None
    elapsed_s: float
    price_per_hour: float | None


def listing(run_dir: Path, now: float) -> Listing:
    """`ls`'s row of a run, never from a whole long journal: the newest usable checkpoint and the
    journal after it; without one, the journal when it is small (under 32 MiB), else the row the
    newest checkpoint's header keeps (written by any version; its phase "as of" its time). Only a
    long journal with no checkpoint at all (recorded before checkpoints existed) is reduced whole."""
    run_dir = Path(run_dir)
    header = None
    if best_checkpoint(run_dir, RunPaths(run_dir).events) is None and _journal_bytes(run_dir) > LISTING_FULL_BYTES:
        header = _newest_listing(run_dir)
    if header is None:
        state, _ = state_from_run_dir(run_dir)
        elapsed = state.elapsed_s(now)
        return Listing(list(state.command), state.phase(now)[1], state.steps_done, state.steps_requested,
                       elapsed, state.price_per_hour)
    at = time.strftime("%H:%M:%S", time.localtime(header.last_t)) if header.last_t else "?"
    started = header.started_t
    return Listing(list(header.command), f"{header.phase} (as of {at})", header.steps_done, header.steps_requested,
                   now - started if started is not None else 0.0, header.price_per_hour)


def _journal_bytes(run_dir: Path) -> int:
    total = 0
    paths = RunPaths(run_dir)
    for p in (paths.events, *paths.journal_segments()):
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total


def _newest_listing(run_dir: Path) -> HeaderListing | None:
    for path in checkpoint_files(run_dir):
        row = read_listing(path)  # checked field by field: a planted header is no row
        if row is not None:
            return row
    return None
