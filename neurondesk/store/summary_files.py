"""Files of a run folder written whole or not at all (summary.json, summary.md, recorder.json):
private to the user, never through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.store.rundir import RunPaths


def write_summary_files(paths: RunPaths, json_text: str, md_text: str) -> None:
    write_atomic(paths.summary_json, json_text)
    write_atomic(paths.summary_md, md_text)


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomic(path: Path, text: str) -> None:
    """``path`` replaced whole by ``text``, through a temporary file this call creates itself
    (O_EXCL: a file left or planted at that name is removed, never reused; 0600, ours)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        fd = os.open(tmp, _NEW, 0o600)
    except FileExistsError:
        tmp.unlink()  # a link or someone else's file: the name is dropped, what it points to untouched
        fd = os.open(tmp, _NEW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
