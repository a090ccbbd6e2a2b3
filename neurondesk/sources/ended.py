"""Runs that ended without their index row: the next neurondesk command writes it.

A recorder removes its run's entry from the registry of live runs only once the run's index row
is written. An entry whose recorder is gone therefore names a run that may have no row: its
recorder found the index locked by another process at the end (it went on trying after letting
its viewers go, and may have given up), or it was killed (SIGKILL) before it wrote a summary.
``settle`` writes the row (from summary.json, or, for a lost recorder, from the journal, billed to
its last recorded time) and removes the entry; while the index stays locked the entry stays, and
the run is listed from its summary all the same (``EndedRun.indexed`` False).

A run whose recorder was lost is said as such wherever it is listed: ``lost_recorder`` reads it
from the run folder (no summary.json, no live recorder, a summary that did not finish).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from neurondesk.core.summary.types import Summary
from neurondesk.sources.rebuild import summary_from_run_dir
from neurondesk.store.index import RunIndex, RunIndexError, RunRow, row_of
from neurondesk.store.live_registry import Entry, remove_entry
from neurondesk.store.liveness import pid_running, read_recorder_info, recorder_alive
from neurondesk.store.rundir import RunPaths, index_path
from neurondesk.store.summary_files import read_summary

SETTLE_PATIENCE_S = 1.0  # a command that settles a run waits this long for a locked index, then lists it anyway


@dataclass(frozen=True)
class RecorderLost:
    at: float | None  # the last recorded time (Unix seconds): what the run is billed to
    workload_pid: int | None
    workload_running: bool

    def words(self) -> str:
        when = time.strftime("%H:%M", time.localtime(self.at)) if self.at else "an unknown time"
        if self.workload_pid is None:
            return f"recorder lost at {when}"
        return (f"recorder lost at {when}; workload pid {self.workload_pid} "
                f"{'still running' if self.workload_running else 'exited'}")


@dataclass(frozen=True)
class EndedRun:
    run_id: str
    run_dir: Path
    summary: Summary
    indexed: bool  # its row is written (False: the index is still locked; listed from the summary)
    lost: RecorderLost | None
    why_not_indexed: str | None = None  # the index's own words (locked by another process, unusable ...)


def _last_time(summary: Summary) -> float | None:
    if summary.started_at is None or summary.elapsed_s is None:
        return None
    try:
        return datetime.fromisoformat(summary.started_at).timestamp() + summary.elapsed_s
    except ValueError:
        return None


def lost_recorder(run_dir: Path | str, summary: Summary) -> RecorderLost | None:
    """The run's recorder was lost before the run finished (None: it finished, or is live)."""
    if summary.finished or recorder_alive(run_dir) or os.path.lexists(RunPaths(run_dir).summary_json):
        return None
    info = read_recorder_info(run_dir)
    pid = info.workload_pid if info else None
    return RecorderLost(_last_time(summary), pid, pid is not None and pid_running(pid))


def _written_summary(run_dir: Path) -> Summary | None:
    try:
        s = read_summary(run_dir)  # bounded, a regular file, read by the summary contract
    except (OSError, ValueError, RecursionError):
        return None
    return s if s is not None and s.run_id else None


def settle(registry: Path, root: Path, entries: list[Entry], notes: list[str] | None = None) -> list[EndedRun]:
    """Each ended entry's run: its row written (entry removed), or listed from its summary while
    the index stays locked (entry kept, for the next command)."""
    out: list[EndedRun] = []
    for e in entries:
        run_dir = Path(e.run_dir)
        if not RunPaths(run_dir).events.exists():
            remove_entry(registry, e.name)  # its folder is gone: nothing to list
            continue
        summary, lost = _written_summary(run_dir), None
        if summary is None:
            try:
                summary, _ = summary_from_run_dir(run_dir)  # billed to its last recorded time
            except (OSError, ValueError) as exc:
                if notes is not None:
                    notes.append(f"run {e.run_id}: its recorder is gone and its journal cannot be read: {exc}")
                continue
            lost = lost_recorder(run_dir, summary)
        why = None
        try:
            RunIndex(index_path(root), patience_s=SETTLE_PATIENCE_S).record(summary, run_dir)
            remove_entry(registry, e.name)
        except (RunIndexError, ValueError) as exc:  # still locked, or unwritable: listed from its summary; the entry stays
            why = str(exc)
        out.append(EndedRun(summary.run_id or e.run_id, run_dir, summary, why is None, lost, why))
    return out


def unindexed_rows(ended: list[EndedRun]) -> list[tuple[EndedRun, RunRow]]:
    """The settled runs whose row the locked index could not take yet, each with its index-like
    row from its summary (how `ls` and `history` list them meanwhile)."""
    return [(e, r) for e in ended if not e.indexed and (r := row_of(e.summary, e.run_dir)) is not None]
