"""The index row of a run whose end found the index locked by another process.

The recorder waits FINISH_INDEX_PATIENCE_S for the lock (viewers see the run "running" until the
recorder lets go of its folder), then finishes without the row: the run stays in the registry of
live runs, whose entry says a row may be missing. Once its viewers are gone it tries again until
the lock frees (up to GIVE_UP_S), then removes the entry; the next neurondesk command that finds
the entry (ls, history) writes the row otherwise (sources/ended.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from neurondesk.core.events import run_events as ev
from neurondesk.core.summary.types import Summary
from neurondesk.store.index import RunIndex, RunIndexBusy

FINISH_INDEX_PATIENCE_S = 2.0
TRY_S = 1.0  # each try's wait for the lock
GIVE_UP_S = 600.0


def pending_words(exc: Exception) -> str:
    return (f"{exc}: the run's row is written as soon as it frees, by this recorder or by the next neurondesk "
            "command (ls, history); the run is listed from its summary meanwhile")


def write_pending_row(index: Path, summary: Summary, run_dir: Path, give_up_s: float = GIVE_UP_S) -> bool:
    """True once the row is written; False when the lock did not free in ``give_up_s`` or the index
    cannot be written at all (the registry entry stays: the next command tries)."""
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        try:
            RunIndex(index, patience_s=TRY_S).record(summary, run_dir)
            return True
        except RunIndexBusy:
            continue
        except Exception:  # noqa: BLE001 - unwritable: nobody to tell here; the entry is kept
            return False
    return False


def record_row(index: Path, summary: Summary, run_dir: Path) -> tuple[tuple[Path, Summary] | None, ev.Notice | None]:
    """The run's index row at its end, after a short wait (a lock held by another process must not
    keep the run "running" for viewers): (None, None) when written; ((index, summary), a notice)
    when the index is locked (written once the lock frees: write_pending_row); (None, a notice) when
    it cannot be written (the run folder is the truth; the index is a convenience)."""
    try:
        RunIndex(index, patience_s=FINISH_INDEX_PATIENCE_S).record(summary, run_dir)
    except RunIndexBusy as exc:
        return (index, summary), ev.Notice(t=time.time(), level="info", source="index", message=pending_words(exc))
    except Exception as exc:  # noqa: BLE001 - the run folder is the truth; the index is a convenience
        return None, ev.Notice(t=time.time(), level="warn", message=f"run index not updated: {exc}")
    return None, None
