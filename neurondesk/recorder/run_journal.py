"""The run's journal as the recorder keeps it: each event written before it is reduced, a full or
refusing disk met by keeping events in memory and then a fallback folder, a checkpoint of the
reduced state after a flush when one is due. Problems are said once each, as notices that go
through ``notice`` (the recorder's record: journaled and reduced like any event)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.recorder.checkpointing import Checkpointer
from neurondesk.recorder.disk_full import DiskFullFallback
from neurondesk.store.journal import JournalError, JournalWriter
from neurondesk.store.rundir import RunPaths
from neurondesk.store.write_errors import advice, cause_errno, is_disk_full


class RunJournal:
    def __init__(self, paths: RunPaths, run_id: str, notice: Callable[[ev.Event], None],
                 clock: Callable[[], float]) -> None:
        self.paths = paths
        self.writer: JournalWriter | None = None
        self.error: str | None = None  # the journal's last write problem (None: it writes)
        self.disk = DiskFullFallback(paths, run_id)  # where the run goes when its disk is full
        self.checkpoints = Checkpointer(paths.dir)  # the reduced state beside the journal, for readers
        self.notice = notice
        self.clock = clock
        self.closed = False  # after the run's end nothing more is said
        self._rotation_said: str | None = None

    def open(self) -> None:
        self.writer = JournalWriter(self.paths.events)

    def moved(self, paths: RunPaths) -> None:
        """The run folder was moved while live: what is written from now on goes there (checkpoints,
        the journal's segment rotations, the fallback's record)."""
        self.paths = self.disk.paths = paths
        self.checkpoints.run_dir = paths.dir
        if self.writer is not None:
            self.writer.moved(paths.events)

    def write(self, e: ev.Event) -> None:
        try:
            self.writer.write(e)  # keeps the event buffered even when the flush it triggers fails
        except JournalError as exc:
            self._trouble(exc)

    def flush(self, state: RunState) -> None:
        try:
            self.writer.flush()
            self.error = None
        except JournalError as exc:  # disk full: events stay buffered in memory; said once
            self._trouble(exc)
            return
        self.checkpoint(state)

    def checkpoint(self, state: RunState, force: bool = False) -> None:
        """After a flush: a checkpoint when one is due; a failed one or a failed segment rotation is
        said once (the journal has every event either way)."""
        for words in (self.checkpoints.after_flush(state, self.writer, force=force), self._new_rotation_problem()):
            if words and not self.closed:
                self.notice(ev.Notice(t=self.clock(), level="warn", source="journal", message=words))

    def close(self) -> None:
        if self.writer is None:
            return
        try:
            self.writer.close()
            return
        except JournalError as exc:
            self.error = str(exc)
        if not self.writer.diverted and self.divert("at the end of the run"):
            try:
                self.writer.close()
            except JournalError as exc:
                self.error = str(exc)

    def divert(self, why: str) -> bool:
        """The run folder's disk is full: the journal goes on in a fallback folder. True when it did."""
        notice = self.disk.divert(self.writer, why)
        if notice is None:
            self.error = self.disk.error
            return False
        self.error = None
        self.notice(ev.Notice(t=self.clock(), level="error", message=notice))
        return True

    @property
    def fallback(self) -> Path | None:
        return self.disk.folder

    def _trouble(self, exc: JournalError) -> None:
        if self.error is None:
            self.error = str(exc)
            self.notice(ev.Notice(t=self.clock(), level="error", message=self._words(exc)))
        self.error = str(exc)
        if self.disk.over_bound(self.writer):
            self.divert("the events kept in memory reached their bound")

    def _words(self, exc: JournalError) -> str:
        """The journal's own words for a full disk; for any other cause (a permission, a read-only
        filesystem) words that do not send the user to free disk space."""
        code = cause_errno(exc)
        if code is None or is_disk_full(code):
            return str(exc)
        self.disk.cause = code
        return (f"cannot write the event journal {self.paths.events}: {os.strerror(code)}; "
                f"{advice(code, str(self.paths.events))}. The events not written are kept in memory and written "
                "when it can be written again; if it cannot by the end of the run, they go to a fallback "
                "folder named then")

    def _new_rotation_problem(self) -> str | None:
        words = self.writer.rotation_problem
        if words is None or words == self._rotation_said:
            return None
        self._rotation_said = words
        return words
