"""Files of a run folder written whole or not at all (summary.json, summary.md, recorder.json):
private to the user, never through a symlink."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from neurondesk.core.summary.types import Summary, SummaryError, load_summary
from neurondesk.store.input_files import read_regular
from neurondesk.store.rundir import RunPaths

MAX_SUMMARY_BYTES = 64 << 20  # a summary is kilobytes (a long many-rank run: a few MB)


def write_summary_files(paths: RunPaths, json_text: str, md_text: str) -> None:
    write_atomic(paths.summary_json, json_text)
    write_atomic(paths.summary_md, md_text)


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def write_atomic(path: Path, text: str) -> None:
    """``path`` replaced whole by ``text``, through a temporary file this call creates itself
    (O_EXCL: a file left or planted at that name is removed, never reused; 0600, ours)."""
    with atomic_writer(path) as f:
        f.write(text)


@contextmanager
def atomic_writer(path: Path) -> Iterator[TextIO]:
    """``write_atomic`` for text written as a stream (an export too large to hold): the file at
    ``path`` appears whole when the block ends, or not at all when it raises."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        fd = os.open(tmp, _NEW, 0o600)
    except FileExistsError:
        tmp.unlink()  # a link or someone else's file: the name is dropped, what it points to untouched
        fd = os.open(tmp, _NEW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def read_summary(run_dir: Path | str) -> Summary | None:
    """A run folder's summary.json (a regular file of at most MAX_SUMMARY_BYTES, never through a
    symlink), decoded once, here, by the contract (core/summary/types.py: any version neurondesk wrote)
    into the Summary every reader takes; None when there is none. OSError, or a SummaryError (a
    ValueError) naming the file and what is wrong with it, in one line."""
    path = RunPaths(run_dir).summary_json
    if not os.path.lexists(path):
        return None
    data = read_regular(path, "a run summary", MAX_SUMMARY_BYTES, follow=False)
    try:
        return load_summary(data)
    except SummaryError as exc:
        raise SummaryError(f"{path}: {exc}") from None
