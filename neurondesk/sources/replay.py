"""Play a recorded run back into its own RunState, as fast as it was recorded or all at once: the
same reducer a live run uses, started from the newest usable checkpoint (sources/rebuild.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import Summary
from neurondesk.sources.rebuild import journal_of, resume
from neurondesk.store.journal import JournalProblem, iter_journal
from neurondesk.store.rundir import RunPaths


def recording_gap(run_dir: Path | str, summary: Summary) -> str | None:
    """What a summary of an unfinished journal lacks, in words; None for a finished run."""
    from datetime import datetime

    from neurondesk.store.liveness import read_recorder_info, recorder_alive

    if summary.finished:
        return None
    if recorder_alive(run_dir):
        return f"{run_dir} is still being recorded: this summary covers the run so far"
    started = summary.started_at
    last = None
    if started and summary.elapsed_s is not None:
        last = datetime.fromisoformat(started).timestamp() + summary.elapsed_s
    when = datetime.fromtimestamp(last).strftime("%Y-%m-%d %H:%M:%S") if last else "an unknown time"
    info = read_recorder_info(run_dir)
    pid = f" (pid {info.workload_pid})" if info and info.workload_pid else ""
    return (f"the recording of {run_dir} stopped at {when} (its recorder is gone) before the workload "
            f"ended: steps, compiles and the exit after that are missing; the workload{pid} may have run on, "
            f"its output is in {RunPaths(run_dir).stdout_log} and stderr.log")


class ReplaySource:
    """Plays a recorded run into its own RunState, as fast as it was recorded times ``speed``.

    ``poll()`` applies every event whose offset from the first event is at most the replay's
    position: (clock() - start) x speed seconds of recorded time, or everything at once when
    ``speed`` is 0. ``until`` stops the replay at that offset (seconds of recorded time), for a
    screen mid-run. ``now()`` is the replay's position as a recorded wall time, for the views'
    live timers. The journal is read as the replay goes. No Textual here: the console polls it
    the way it pumps a live session.
    """

    live = False

    def __init__(self, run_dir: Path | str, speed: float = 1.0, until: float | None = None,
                 clock=None) -> None:
        import time

        path = journal_of(run_dir)
        if speed < 0:
            raise ValueError(f"--speed {speed}: give a positive factor, or 0 for all at once")
        self.run_dir = Path(run_dir)
        self.problems: list[JournalProblem] = []
        self.notes: list[str] = []
        self.state, start = RunState(), (0, 0)
        self.t0: float | None = None
        if speed == 0 and until is not None:  # the screen at that time: from a checkpoint before it
            self.t0 = _first_t(path)
            if self.t0 is not None:
                self.state, start = resume(self.run_dir, path, self.t0 + until, self.notes)
        self.problems += [JournalProblem(0, n, "") for n in self.notes]
        self._events = iter_journal(path, self.problems, start)
        self._next = next(self._events, None)  # the first event not applied yet
        self.speed = speed
        self.until = until
        self.clock = clock or time.monotonic
        if self.t0 is None:
            self.t0 = self._next.t if self._next is not None else 0.0
        self.last_t = self.state.last_t if self.state.last_t is not None else self.t0  # of the last event applied
        self.applied = self.state.event_count
        self._start: float | None = None
        self.after_poll: list[Callable[[], None]] = []  # called by poll(), on its thread (exporter/viewer.py)

    @property
    def label(self) -> str:
        speed = "all at once" if self.speed == 0 else f"×{self.speed:g}"
        return f"replay of {self.run_dir.name} ({speed})"

    def position(self) -> float:
        """Seconds of recorded time played so far (inf: all at once)."""
        if self._start is None:
            return 0.0
        pos = float("inf") if self.speed == 0 else (self.clock() - self._start) * self.speed
        return pos if self.until is None else min(pos, self.until)

    def poll(self, max_events: int = 100_000) -> int:
        """Apply the events that are due; return how many."""
        if self._start is None:
            self._start = self.clock()
        limit = self.t0 + self.position()
        n = 0
        state, e = self.state, self._next
        while e is not None and n < max_events and e.t <= limit:
            state.apply(e)
            self.last_t = e.t
            n += 1
            e = next(self._events, None)
        self._next = e
        self.applied += n
        for hook in self.after_poll:
            hook()
        return n

    @property
    def done(self) -> bool:
        """Every event played (a replay stopped by ``until`` before the end is not done)."""
        return self._next is None

    def now(self) -> float:
        pos = self.position()
        if self.done or pos == float("inf"):
            return self.last_t
        return self.t0 + pos

    def stop(self) -> str:
        return "a replay has no workload to stop"

    def export_summary(self) -> Path:
        """Write the summary of what has been replayed so far next to the journal."""
        from neurondesk.reports.summary_writer import to_json, to_markdown
        from neurondesk.store.summary_files import write_atomic

        s = run_summary(self.state, self.now())
        paths = RunPaths(self.run_dir)
        write_atomic(paths.replay_summary_json, to_json(s))  # 0600, never through a link, as the recorder's own summary
        write_atomic(paths.replay_summary_md, to_markdown(s))
        return paths.replay_summary_json

    def finish(self) -> None:
        """Nothing to flush: a replay writes nothing unless asked to export."""


def _first_t(path: Path) -> float | None:
    """The time of the journal's first event (the replay's zero)."""
    events = iter_journal(path, [])
    try:
        first = next(events, None)
    finally:
        events.close()
    return first.t if first is not None else None
