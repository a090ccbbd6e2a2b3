"""What the recorder does when the run folder's disk is full (the folder itself: store/fallback.py).

The journal keeps what it could not write in memory. Once that passes MAX_PENDING_BYTES, or at the
run's end if the disk is still full, the journal goes on in a fallback folder on another
filesystem, and a full copy of the summary is written beside it (also when only the summary could
not be written in the run folder)."""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.store.fallback import (
    REMAINDER_FILE,
    FallbackError,
    FallbackInfo,
    make_fallback_dir,
    write_fallback_info,
)
from neurondesk.store.journal import JournalError, JournalWriter
from neurondesk.store.own_files import FileId, NotOurFile, create_new
from neurondesk.store.rundir import RunPaths
from neurondesk.store.summary_files import write_summary_files
from neurondesk.store.write_errors import is_disk_full

MAX_PENDING_BYTES = 64 << 20  # unwritten journal kept in memory before it moves to a fallback folder


class DiskFullFallback:
    def __init__(self, paths: RunPaths, run_id: str, max_pending_bytes: int = MAX_PENDING_BYTES) -> None:
        self.paths = paths
        self.run_id = run_id
        self.max_pending_bytes = max_pending_bytes
        self.folder: Path | None = None  # made at the first need
        self.error: str | None = None  # why the last attempt failed
        self.cause: int | None = None  # the errno of a failed write that is not a full disk (EACCES ...)
        self.remainder: FileId | None = None  # the remainder file this run made in the folder

    def over_bound(self, journal: JournalWriter) -> bool:
        return journal.pending_bytes > self.max_pending_bytes and not journal.diverted

    def _make_folder(self) -> Path | None:
        if self.folder is None:
            try:
                self.folder = make_fallback_dir(self.paths.dir, run_id=self.run_id)
            except FallbackError as exc:
                self.error = str(exc)
        return self.folder

    def divert(self, journal: JournalWriter, why: str) -> str | None:
        """The journal goes on in the fallback folder, starting with what is still in memory.
        Returns the notice to journal when it did; None (and ``error``) when it could not."""
        refused = ""
        for _ in range(2):  # a remainder file planted in the folder: refused, and a new folder made once
            folder = self._make_folder()
            if folder is None:
                return None
            try:
                kept = journal.divert(folder / REMAINDER_FILE, continues=self.remainder)
                self.remainder = journal.file_id
                write_fallback_info(folder, FallbackInfo(self.run_id, str(self.paths.dir), kept))
                break
            except (JournalError, OSError) as exc:
                self.error = str(exc)
                if not isinstance(exc.__cause__, NotOurFile):
                    return None
                refused = f"{exc}. "
                self.folder = None  # that folder now holds something else: make_fallback_dir passes it by
        else:
            return None
        if self.cause is not None and not is_disk_full(self.cause):
            trouble = f"{self.paths.dir} cannot be written ({os.strerror(self.cause)}; {why})"
        else:
            trouble = f"the disk holding {self.paths.dir} is full ({why})"
        return (f"{refused}{trouble}: the journal goes on in {folder}, "
                f"with a copy of the summary at the end; rebuild the whole run with `neurondesk summary {folder}`")

    def save_summary(self, journal: JournalWriter | None, json_text: str, md_text: str) -> None:
        """A full copy of the summary beside the journal's remainder (or, when only the summary
        could not be written, alone with a record of where the journal is)."""
        folder = self._make_folder()
        if folder is None:
            return
        try:
            if journal is None or not journal.diverted:
                kept = self.paths.events.stat().st_size if self.paths.events.exists() else 0
                if self.remainder is None:  # made by this open, never a planted one
                    fd, self.remainder = create_new(folder / REMAINDER_FILE, os.O_WRONLY, "the fallback journal")
                    os.close(fd)
                write_fallback_info(folder, FallbackInfo(self.run_id, str(self.paths.dir), kept))
            write_summary_files(RunPaths(folder), json_text, md_text)
        except OSError as exc:
            self.error = f"cannot write the summary to the fallback folder {folder}: {exc.strerror or exc}"
