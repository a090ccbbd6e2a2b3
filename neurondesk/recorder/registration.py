"""The recorder's entry among the live runs (store/live_registry.py), and its folder moved while live."""

from __future__ import annotations

import os
import time
from pathlib import Path

from neurondesk.core.events import run_events as ev
from neurondesk.store.live_registry import Registration, RegistryRefused, folder_now, register, registry_dir
from neurondesk.store.liveness import RecorderLock


def register_live_run(run_root: Path, run_id: str, run_dir: Path, lock_fd: int) -> tuple[Registration | None, str | None]:
    """(the entry, None), or (None, why not) when it could not be written: the run goes on without it,
    and `ls` / `attach ID` find it only under its folder."""
    registry = registry_dir(run_root)
    try:
        return register(registry, run_id, run_dir, lock_fd, os.getpid(), time.time()), None
    except (RegistryRefused, OSError) as exc:
        why = str(exc) if isinstance(exc, RegistryRefused) else f"cannot write in {registry}: {exc.strerror or exc}"
        return None, (f"this run is not in the registry of live runs ({why}); `neurondesk ls` and `attach ID` "
                      f"find it only under its folder: `neurondesk attach {run_dir}`")


def moved_folder_notice(run_dir: Path, lock: RecorderLock | None) -> tuple[Path, ev.Notice] | None:
    """(where the folder is now, the notice saying so) when it was moved while the run was live."""
    now = folder_now(run_dir, lock.fd) if lock is not None and lock.fd >= 0 else None
    if now is None or now == run_dir:
        return None
    return now, ev.Notice(t=time.time(), level="warn", source="registry", message=(
        f"the run folder was moved while the run was live: {run_dir} is now {now}; "
        "its checkpoints, journal segments, summary and index row are written there"))
