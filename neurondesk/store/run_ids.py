"""A run's id: unique whatever its folder is called (issue 24, item 8).

A run made under the run root is named by its folder (made there with an exclusive mkdir, so the
name is unique). A ``--run-dir`` folder elsewhere keeps its base name as its id while no other
folder has that id (in the run index, among the live runs, or as a folder under the run root);
otherwise the id is ``NAME-XXXXXX``, six hex digits of a hash of the folder's real path: `a/run`
and `b/run` never share an id, nor an index row, and the same folder run again (``--force``)
keeps its id."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from neurondesk.store.index import RunIndex, RunIndexError
from neurondesk.store.live_registry import RegistryRefused, live_entries, registry_dir
from neurondesk.store.rundir import index_path


def _same(a: str | Path, b: str) -> bool:
    return os.path.realpath(a) == b


def _taken(run_id: str, real: str, root: Path) -> bool:
    """Whether another folder than ``real`` already has ``run_id``; True when it cannot be told."""
    under_root = root / run_id
    if os.path.lexists(under_root) and not _same(under_root, real):
        return True
    index = index_path(root)
    if index.exists():
        try:
            if any(r.id == run_id and not _same(r.run_dir, real) for r in RunIndex(index).list_runs(limit=-1)):
                return True
        except RunIndexError:
            return True
    try:
        live = live_entries(registry_dir(root))
    except (RegistryRefused, OSError):
        return True
    return any(r.entry.run_id == run_id and not _same(r.entry.run_dir, real) for r in live)


def run_id_for(run_dir: Path, root: Path) -> str:
    """The id of the run about to be recorded in ``run_dir`` (``root``: the run root)."""
    name = run_dir.name
    real = os.path.realpath(run_dir)
    if _same(run_dir.parent, os.path.realpath(root)):
        return name  # made under the run root: its name is unique there
    if not _taken(name, real, root):
        return name
    return f"{name}-{hashlib.sha256(real.encode('utf-8', 'surrogateescape')).hexdigest()[:6]}"
