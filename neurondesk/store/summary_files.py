"""summary.json and summary.md of a run folder, written atomically (never half a file)."""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.store.rundir import RunPaths


def write_summary_files(paths: RunPaths, json_text: str, md_text: str) -> None:
    _write_atomic(paths.summary_json, json_text)
    _write_atomic(paths.summary_md, md_text)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
