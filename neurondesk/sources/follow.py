"""A live run as a viewer sees it: its journal followed as the recorder appends to it, reduced
into the viewer's own RunState (the same reducer a replay uses: live and replay are one screen).
Requests (stop, signal, export) go to the recorder over its control socket; a viewer never holds
the recorder's objects, so it can come and go while the run goes on."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.core.summary.types import Summary
from neurondesk.sources.control_client import ControlError, request
from neurondesk.sources.rebuild import resume
from neurondesk.store.fallback import REMAINDER_FILE, find_fallback
from neurondesk.store.journal import JournalProblem
from neurondesk.store.journal_tail import JournalTail
from neurondesk.store.liveness import read_recorder_info, recorder_alive
from neurondesk.store.rundir import RunPaths

ALIVE_CHECK_S = 1.0
FALLBACK_CHECK_S = 5.0  # the fallback search lists the temporary folder: not at every idle poll
FINISH_WAIT_S = 30.0  # after the run's end, for the recorder to write the summary and index row


class FollowSource:
    live = True

    def __init__(self, run_dir: Path | str, *, attached: bool = False,
                 recorder: subprocess.Popen | None = None, clock: Callable[[], float] = time.time) -> None:
        self.paths = RunPaths(Path(run_dir))
        self.run_dir = self.paths.dir
        self.attached = attached  # opened by `attach` (q detaches) rather than by `run`
        self.recorder = recorder  # the recorder process when this viewer launched it
        self.clock = clock
        # the reduced state so far from the newest checkpoint: only the tail is read; ``notes``: why
        # a checkpoint there could not be used, in one line
        notes: list[str] = []
        self.notes = notes
        self.state, start = resume(self.run_dir, self.paths.events, notes=notes)
        self.tail = JournalTail(self.paths.events, start)
        self.tail.problems += [JournalProblem(0, n, "") for n in notes]
        self.tail.problem_count += len(notes)
        self.new_events: list = []
        self.after_poll: list[Callable[[], None]] = []  # called by poll(), on its thread (exporter/viewer.py)
        self.recorder_lost = False  # the recorder died before the run finished
        # the recorder finished, but the journal lacks the end (its disk and the fallback's full):
        # the summary it wrote at the end (the run folder's or the fallback's summary.json)
        self.final_summary: Summary | None = None
        self.fallback: Path | None = None  # where the journal went on when the run folder's disk was full
        self._fallback_checked = float("-inf")
        self._alive_checked = 0.0
        self._output = {"stdout": OutputBytes(self.paths.stdout_log, from_end=attached),
                        "stderr": OutputBytes(self.paths.stderr_log, from_end=attached)}

    @property
    def label(self) -> str:
        return f"{'attached to' if self.attached else 'run folder'} {self.run_dir}"

    def poll(self) -> int:
        """Take in what the recorder journaled since the last poll; ``new_events`` holds it."""
        events = self.tail.read_new()
        state = self.state
        for e in events:
            state.apply(e)
        self.new_events = events
        if not state.finished and not self.recorder_lost and self.final_summary is None:
            now = time.monotonic()
            if now - self._alive_checked >= ALIVE_CHECK_S:
                self._alive_checked = now
                if not events and self.fallback is None and now - self._fallback_checked >= FALLBACK_CHECK_S:
                    self._fallback_checked = now
                    self._follow_fallback()
                if not self._recorder_running():
                    self.new_events += self._last_words()
                    self.recorder_lost = not self.state.finished
        for hook in self.after_poll:
            hook()
        return len(self.new_events)

    def _follow_fallback(self) -> None:
        """The run folder's disk filled up and the journal went on elsewhere: follow it there."""
        folder = find_fallback(self.run_dir, self.state.run_id)
        if folder is None:
            return
        self.new_events += self._last_words()  # the run folder's part is complete once the record exists
        self.fallback = folder
        self.tail = self.tail.continue_in(folder / REMAINDER_FILE)
        self.new_events += self._last_words()

    def new_output(self) -> list[tuple[str, bytes]]:
        """The workload's own bytes written since the last call, per stream, exactly as written
        (carriage returns and colours included). An attached viewer starts at the end."""
        out = []
        for stream, reader in self._output.items():
            data = reader.read()
            if data:
                out.append((stream, data))
        return out

    def _recorder_running(self) -> bool:
        if self.recorder is not None and self.recorder.poll() is not None:
            return False
        return recorder_alive(self.run_dir)

    def _last_words(self) -> list:
        """What it journaled between our last read and its death."""
        events = self.tail.read_new()
        for e in events:
            self.state.apply(e)
        return events

    @property
    def done(self) -> bool:
        return self.state.finished or self.recorder_lost or self.final_summary is not None

    @property
    def running(self) -> bool:
        return not self.done

    @property
    def workload_pid(self) -> int | None:
        info = read_recorder_info(self.run_dir)
        return info.workload_pid if info else None

    def now(self) -> float:
        """The viewer's clock; for a run whose recorder was lost, its last recorded time: nothing
        after it is known, so nothing after it is billed or timed."""
        if self.recorder_lost and self.state.last_t:
            return self.state.last_t
        return self.clock()

    def _ask(self, op: str, **args) -> str:
        try:
            return request(self.run_dir, op, **args)
        except ControlError as exc:
            return str(exc)

    def stop(self) -> str:
        if self.done:
            return "the workload has already exited"
        return self._ask("stop")

    def send_signal(self, sig: str) -> str:
        return self._ask("signal", sig=sig)

    def stacks(self) -> tuple[str, Path]:
        """Every rank's Python stacks now, into a file of the run folder: (who stands where, the file)."""
        from neurondesk.sources.stacks import save_stacks

        return save_stacks(self.run_dir)

    def export_summary(self) -> Path:
        try:
            return Path(request(self.run_dir, "export"))
        except ControlError as exc:
            raise OSError(str(exc)) from exc

    def finish(self, timeout_s: float = FINISH_WAIT_S) -> bool:
        """After the run's end: wait for the recorder to write the summary and index row and
        exit. True when it did (summary.json is there)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._recorder_running():
            self.poll()
            time.sleep(0.05)
        self.poll()
        if self.recorder is not None and self.recorder.poll() is None and not recorder_alive(self.run_dir):
            try:
                self.recorder.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        if not self.state.finished and self.fallback is None:
            self._follow_fallback()
            self.recorder_lost = self.recorder_lost and not self.state.finished
        if not self.state.finished and not self._recorder_running():
            self.final_summary = finished_summary(self.run_dir, self.fallback)
            self.recorder_lost = self.recorder_lost and self.final_summary is None
        return self.summary_path.exists() and not self._recorder_running()

    def summary(self) -> Summary:
        """The run's summary, for the headless end: the one the recorder wrote at the end (summary.json, in the
        run folder or the fallback's), else, where no recorder finished it (a lost recorder's run), rebuilt
        from the journal by core (core/summary/build.py)."""
        if self.final_summary is not None:
            return self.final_summary
        from neurondesk.core.summary.build import run_summary, with_late_notices

        written = finished_summary(self.run_dir, self.fallback) if self.state.finished else None
        if written is not None and written.run_id == self.state.run_id:
            return with_late_notices(written, self.state)
        return run_summary(self.state)

    @property
    def summary_path(self) -> Path:
        """summary.json as the recorder wrote it: in the run folder, or beside the journal's
        remainder when the run folder's disk was full."""
        return RunPaths(self.fallback or self.run_dir).summary_json

    def close(self) -> None:
        self.tail.close()
        for reader in self._output.values():
            reader.close()


class OutputBytes:
    """Reads what a growing output file gained since the last read (bounded per call)."""

    MAX_READ = 1 << 20

    def __init__(self, path: Path, from_end: bool = False) -> None:
        self.path = path
        self.from_end = from_end
        self.fd: int | None = None

    def read(self) -> bytes:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                return b""
            if self.from_end:
                os.lseek(self.fd, 0, os.SEEK_END)
        return os.read(self.fd, self.MAX_READ)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def finished_summary(run_dir: Path, fallback: Path | None) -> Summary | None:
    """The summary a recorder wrote at the run's end (finished) when the journal could not take the
    end itself: the run folder's summary.json, else the fallback folder's copy. None: none says the
    run finished (the recorder was killed: the run is a lost recorder's)."""
    from neurondesk.store.summary_files import read_summary

    for folder in (run_dir, fallback or find_fallback(run_dir)):
        if folder is None:
            continue
        try:
            s = read_summary(folder)  # bounded, a regular file, read by the summary contract
        except (OSError, ValueError, RecursionError):
            continue
        if s is not None and s.finished:
            return s
    return None
