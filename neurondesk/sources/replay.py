"""Rebuild a run from its journal alone: the same reducer a live run uses, started from the newest
usable checkpoint of it (sources/resume.py) so that only the journal after it is reduced."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import Summary
from neurondesk.sources.resume import resume
from neurondesk.store.fallback import find_fallback, is_fallback_dir, open_whole_journal
from neurondesk.store.journal import JournalProblem, iter_journal, iter_journal_stream
from neurondesk.store.rundir import EVENTS_FILE


def state_from_run_dir(run_dir: Path, target_loss: float | None = None,
                       notes: list[str] | None = None) -> tuple[RunState, list[JournalProblem]]:
    """``target_loss``: reduce as if the run had been started with this --target-loss (compare).
    ``run_dir`` may be a fallback folder (the run folder's disk was full), or a run folder that
    has one: the whole journal is read then, and ``notes`` says so."""
    run_dir = Path(run_dir)
    fallback = run_dir if is_fallback_dir(run_dir) else find_fallback(run_dir)
    problems: list[JournalProblem] = []
    if fallback is not None:
        stream, warning = open_whole_journal(fallback)
        if notes is not None:
            notes.append(f"the run folder's disk filled up during this run: read its journal, then the rest "
                         f"from {fallback}")
            notes += [warning] if warning else []
        with stream:
            return _reduce(iter_journal_stream(stream, problems), target_loss), problems
    path = run_dir / EVENTS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: give a run folder made by `neurondesk run` (see `neurondesk history`)")
    if target_loss is not None:  # reduced as if started otherwise: no checkpoint holds that
        return _reduce(iter_journal(path, problems), target_loss), problems
    state, start = resume(run_dir, path, notes=notes)
    state = _reduce(iter_journal(path, problems, start), None, state)
    if notes is not None:  # a journal-wide problem (a segment deleted by hand) is a note, not a line
        notes += [p.error for p in problems if p.line == 0]
        problems = [p for p in problems if p.line != 0]
    return state, problems


def _reduce(events, target_loss: float | None, state: RunState | None = None) -> RunState:
    state = RunState() if state is None else state
    for e in events:
        if target_loss is not None and isinstance(e, ev.RunStarted):
            e = dataclasses.replace(e, target_loss=target_loss)
        state.apply(e)
    return state


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
            f"its output is in {Path(run_dir) / 'stdout.log'} and stderr.log")


def summary_from_run_dir(run_dir: Path, target_loss: float | None = None,
                         notes: list[str] | None = None) -> tuple[Summary, list[JournalProblem]]:
    """The run's summary rebuilt from its journal (`summary`, `advise`, `compare`, `reindex`)."""
    state, problems = state_from_run_dir(run_dir, target_loss, notes)
    return run_summary(state), problems


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

        path = Path(run_dir) / EVENTS_FILE
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: give a run folder made by `neurondesk run` "
                                    "(see `neurondesk history`)")
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
        out = self.run_dir / "replay-summary.json"
        write_atomic(out, to_json(s))  # 0600, never through a link, as the recorder's own summary
        write_atomic(out.with_suffix(".md"), to_markdown(s))
        return out

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
