"""Which runs are live (their recorder holds its lock) and which finished lately (the index).

Live runs are found in the registry of live runs (store/live_registry.py: one entry per live run,
wherever its folder is), and, for recorders that have no entry there, under the run root."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from neurondesk.core.figures.cost import cost_so_far
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import Summary
from neurondesk.sources.ended import EndedRun, RecorderLost, lost_recorder, settle, unindexed_rows
from neurondesk.sources.listing import listing
from neurondesk.sources.rebuild import state_from_run_dir
from neurondesk.store.index import RunIndex, RunIndexError, RunRow
from neurondesk.store.live_registry import RegisteredRun, RegistryRefused, live_entries, registry_dir
from neurondesk.store.liveness import read_recorder_info, recorder_alive
from neurondesk.store.rundir import RunPaths, default_run_root, index_path

SCAN_LIMIT = 500  # run folders looked at for live ones, newest first


class RunNotFound(LookupError):
    pass


@dataclass(frozen=True)
class LiveRun:
    run_id: str
    run_dir: Path
    command: list[str]
    phase: str
    step: int
    steps_requested: int | None
    elapsed_s: float
    cost_so_far_usd: float | None


@dataclass(frozen=True)
class FinishedRun:
    run_id: str
    run_dir: str
    command: str | None
    started_at: str | None
    steps: int | None
    exit_code: int | None
    total_usd: float | None
    lost: str | None = None  # its recorder was lost: "recorder lost at 14:02; workload pid 4242 still running"
    unindexed: str | None = None  # listed from its summary: why its row is not in the index yet


def _root(root: Path | None) -> Path:
    return root if root is not None else default_run_root()


def registered_runs(root: Path | None = None, notes: list[str] | None = None,
                    ended: list[EndedRun] | None = None) -> list[RegisteredRun]:
    """The registry's live runs, newest first; a registry that is refused (another user's,
    writable by others, a symlink) is said in ``notes``. Entries whose recorder is gone are
    settled on the way (sources/ended.py: their index row written), and put in ``ended``."""
    registry, stale = registry_dir(_root(root)), []
    try:
        live = live_entries(registry, stale)
    except RegistryRefused as exc:
        if notes is not None:
            notes.append(str(exc))
        return []
    settled = settle(registry, _root(root), stale, notes) if stale else []
    if ended is not None:
        ended.extend(settled)
    return live


def _scanned_live_dirs(base: Path) -> list[Path]:
    if not base.is_dir():
        return []
    dirs = sorted((d for d in base.iterdir() if d.is_dir() and not d.is_symlink()), reverse=True)
    return [d for d in dirs[:SCAN_LIMIT] if RunPaths(d).recorder_lock.exists() and recorder_alive(d)]


def _started(d: Path) -> float:
    try:
        return os.stat(RunPaths(d).recorder_info).st_mtime  # written as its recorder started
    except OSError:
        return 0.0


def live_run_dirs(root: Path | None = None, notes: list[str] | None = None,
                  ended: list[EndedRun] | None = None) -> list[Path]:
    """Newest first: the registry's (wherever their folders are), and those under the run root
    whose recorder has no entry. A run moved or deleted while live is said in ``notes``."""
    found: dict[str, tuple[float, Path]] = {}
    for r in registered_runs(root, notes, ended):
        if r.note and notes is not None:
            notes.append(r.note)
        if r.run_dir is not None:
            found.setdefault(os.path.realpath(r.run_dir), (r.entry.started, r.run_dir))
    for d in _scanned_live_dirs(_root(root)):
        found.setdefault(os.path.realpath(d), (_started(d), d))
    return [d for _, d in sorted(found.values(), key=lambda t: t[0], reverse=True)]


def live_runs(root: Path | None = None, now: float | None = None, notes: list[str] | None = None,
              ended: list[EndedRun] | None = None) -> list[LiveRun]:
    now = time.time() if now is None else now
    rows = []
    for d in live_run_dirs(root, notes, ended):
        try:
            row = listing(d, now)  # from the newest checkpoint: never a whole long journal
        except OSError:
            continue  # ended between the scan and the read
        rows.append(LiveRun(d.name, d, row.command, row.phase, row.step, row.steps_requested, row.elapsed_s,
                            cost_so_far(row.price_per_hour, row.elapsed_s)))
    return rows


def finished_runs(root: Path | None = None, limit: int = 10, ended: list[EndedRun] | None = None) -> list[FinishedRun]:
    """The latest finished runs in the index, newest first, and before them the ended runs whose
    row could not be written yet (``ended``: from registered_runs); a run whose recorder was lost
    says so (``lost``)."""
    path = index_path(_root(root))
    if limit <= 0:
        return []
    waiting = [_finished(row, lost=e.lost, unindexed=e.why_not_indexed or "not written yet")
               for e, row in unindexed_rows(ended or [])]
    rows = []
    if path.exists():
        try:
            rows = RunIndex(path).list_runs(limit=limit)
        except RunIndexError:
            rows = []
    listed = {(w.run_id, w.run_dir) for w in waiting}
    done = [_finished(r, lost=lost_recorder(r.run_dir, r.summary) if r.exit_code is None else None)
            for r in rows if (r.id, r.run_dir) not in listed]
    return (waiting + done)[:limit]


def _finished(r: RunRow, lost: RecorderLost | None = None, unindexed: str | None = None) -> FinishedRun:
    return FinishedRun(r.id, r.run_dir, r.command, r.started_at, r.steps, r.exit_code,
                       r.summary.cost.total_usd, lost.words() if lost else None, unindexed)


def resolve_live_run(arg: str | None, root: Path | None = None, notes: list[str] | None = None) -> Path:
    """A run folder, a run id, or an id prefix (live runs wherever their folders are, runs under the
    run root, a finished run's id in the index); None: the latest live run. ``notes``: that the run
    found was moved while live, or that the registry was refused."""
    base = _root(root)
    if arg is None:
        live = live_run_dirs(root, notes)
        if not live:
            raise RunNotFound(f"no live run (none registered, none under {base}); start one with "
                              "`neurondesk run --detach -- CMD`, or list runs with `neurondesk ls`")
        return live[0]
    for candidate in (Path(arg), base / arg):
        if RunPaths(candidate).events.exists():
            return candidate
    registered = registered_runs(root, notes)
    exact = [r for r in registered if arg in (r.entry.run_id, r.run_dir.name if r.run_dir else None)]
    alive = {os.path.realpath(r.run_dir): r for r in exact if r.run_dir is not None}
    if len(alive) > 1:
        raise RunNotFound(f"{arg!r} names {len(alive)} live runs ({', '.join(sorted(alive))}); give its folder")
    if alive:
        r = next(iter(alive.values()))
        if r.note and notes is not None:
            notes.append(r.note)
        return r.run_dir
    if exact:  # its folder was deleted while live
        raise RunNotFound(exact[0].note or f"run {arg!r}: its folder is gone")
    matches = {os.path.realpath(d): (d.name, d) for d in (base.glob(f"{arg}*") if base.is_dir() else ())
               if RunPaths(d).events.exists()}
    for r in registered:
        if r.run_dir is not None and r.entry.run_id.startswith(arg):
            matches.setdefault(os.path.realpath(r.run_dir), (r.entry.run_id, r.run_dir))
    if len(matches) == 1:
        return next(iter(matches.values()))[1]
    if len(matches) > 1:
        names = sorted(name for name, _ in matches.values())
        raise RunNotFound(f"{arg!r} matches {len(matches)} runs ({', '.join(names[:5])}); give more of the id")
    indexed = _indexed_run_dir(arg, base)
    if indexed is not None:
        return indexed
    raise RunNotFound(f"no run {arg!r} (neither a run folder, nor the id of a live run or of a run under {base}); "
                      "see `neurondesk ls`")


def _indexed_run_dir(run_id: str, base: Path) -> Path | None:
    """A finished run's folder, as the index has it (a --run-dir anywhere)."""
    path = index_path(base)
    if not path.exists():
        return None
    try:
        rows = RunIndex(path).list_runs(limit=-1)
    except RunIndexError:
        return None
    dirs = [Path(r.run_dir) for r in rows if r.id == run_id]
    return next((d for d in dirs if RunPaths(d).events.exists()), None)


def live_summaries(root: Path | None = None, now: float | None = None, notes: list[str] | None = None,
                   ended: list[EndedRun] | None = None) -> list[tuple[Path, Summary]]:
    """(folder, summary so far) of every live run, newest first (`history` lists them)."""
    out = []
    for d in live_run_dirs(root, notes, ended):
        try:
            state, _ = state_from_run_dir(d)
        except (OSError, ValueError):
            continue  # ended between the scan and the read
        out.append((d, run_summary(state, now)))
    return out


def remove_socket_dir(run_dir: Path | str) -> bool:
    """Remove the socket folder (``<tmp>/nd-XXXX``) named in ``run_dir/recorder.json`` when that
    run's recorder is dead: a recorder killed with SIGKILL cannot remove it itself. Only a real
    folder (not a symlink) directly under this process's temp dir, named ``nd-...`` and owned by
    this user, is removed. True when one was."""
    info = read_recorder_info(run_dir)
    if info is None or not info.control_socket or recorder_alive(run_dir):
        return False
    sock_dir = os.path.dirname(os.path.abspath(info.control_socket))
    if (not os.path.basename(sock_dir).startswith("nd-")
            or os.path.realpath(os.path.dirname(sock_dir)) != os.path.realpath(tempfile.gettempdir())):
        return False
    try:
        st = os.lstat(sock_dir)
    except OSError:
        return False  # gone already (the recorder ended well)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return False
    shutil.rmtree(sock_dir, ignore_errors=True)
    return not os.path.lexists(sock_dir)


def sweep_socket_dirs(root: Path | None = None) -> int:
    """``remove_socket_dir`` for the newest run folders under ``root``; how many were removed."""
    base = _root(root)
    if not base.is_dir():
        return 0
    dirs = sorted((d for d in base.iterdir() if d.is_dir() and not d.is_symlink()), reverse=True)
    return sum(remove_socket_dir(d) for d in dirs[:SCAN_LIMIT] if RunPaths(d).recorder_info.exists())
