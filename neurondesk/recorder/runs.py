"""Which runs are live (their recorder holds its lock) and which finished lately (the index)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from neurondesk.core.cost import cost_so_far
from neurondesk.recorder.replay import state_from_run_dir
from neurondesk.store.index import RunIndex, RunIndexError
from neurondesk.store.liveness import read_recorder_info, recorder_alive
from neurondesk.store.rundir import EVENTS_FILE, INDEX_FILE, RECORDER_INFO, RECORDER_LOCK, default_run_root

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


def _root(root: Path | None) -> Path:
    return root if root is not None else default_run_root()


def live_run_dirs(root: Path | None = None) -> list[Path]:
    """Newest first (run ids sort by time)."""
    base = _root(root)
    if not base.is_dir():
        return []
    dirs = sorted((d for d in base.iterdir() if d.is_dir() and not d.is_symlink()), reverse=True)
    return [d for d in dirs[:SCAN_LIMIT] if (d / RECORDER_LOCK).exists() and recorder_alive(d)]


def live_runs(root: Path | None = None, now: float | None = None) -> list[LiveRun]:
    now = time.time() if now is None else now
    rows = []
    for d in live_run_dirs(root):
        try:
            state, _ = state_from_run_dir(d)
        except OSError:
            continue  # ended between the scan and the read
        elapsed = state.elapsed_s(now)
        rows.append(LiveRun(d.name, d, list(state.command), state.phase(now)[1], state.steps_done,
                            state.steps_requested, elapsed, cost_so_far(state.price_per_hour, elapsed)))
    return rows


def finished_runs(root: Path | None = None, limit: int = 10) -> list[FinishedRun]:
    path = _root(root) / INDEX_FILE
    if not path.exists() or limit <= 0:
        return []
    try:
        rows = RunIndex(path).list_runs(limit=limit)
    except RunIndexError:
        return []
    return [FinishedRun(r.id, r.run_dir, r.command, r.started_at, r.steps, r.exit_code,
                        (r.summary.get("cost") or {}).get("total_usd")) for r in rows]


def resolve_live_run(arg: str | None, root: Path | None = None) -> Path:
    """A run folder, a run id, or an id prefix; None: the latest live run."""
    base = _root(root)
    if arg is None:
        live = live_run_dirs(root)
        if not live:
            raise RunNotFound(f"no live run under {base}; start one with `neurondesk run --detach -- CMD`, "
                              "or list runs with `neurondesk ls`")
        return live[0]
    for candidate in (Path(arg), base / arg):
        if (candidate / EVENTS_FILE).exists():
            return candidate
    matches = sorted(d for d in base.glob(f"{arg}*") if (d / EVENTS_FILE).exists()) if base.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise RunNotFound(f"{arg!r} matches {len(matches)} runs ({', '.join(m.name for m in matches[:5])}); "
                          "give more of the id")
    raise RunNotFound(f"no run {arg!r} (neither a run folder nor a run id under {base}); see `neurondesk ls`")


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
    return sum(remove_socket_dir(d) for d in dirs[:SCAN_LIMIT] if (d / RECORDER_INFO).exists())
