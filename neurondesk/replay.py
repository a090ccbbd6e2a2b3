"""Rebuild a run from its journal alone: the same reducer a live run uses."""

from __future__ import annotations

from pathlib import Path

from neurondesk.core.state import RunState
from neurondesk.core.summary import build_summary
from neurondesk.store.journal import JournalProblem, read_journal
from neurondesk.store.rundir import EVENTS_FILE


def state_from_run_dir(run_dir: Path) -> tuple[RunState, list[JournalProblem]]:
    path = Path(run_dir) / EVENTS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: give a run folder made by `neurondesk run` (see `neurondesk history`)")
    events, problems = read_journal(path)
    state = RunState()
    for e in events:
        state.apply(e)
    return state, problems


def summary_from_run_dir(run_dir: Path) -> tuple[dict, list[JournalProblem]]:
    state, problems = state_from_run_dir(run_dir)
    return build_summary(state), problems


class ReplaySource:
    """Plays a recorded run into its own RunState, as fast as it was recorded times ``speed``.

    ``poll()`` applies every event whose offset from the first event is at most the replay's
    position: (clock() - start) x speed seconds of recorded time, or everything at once when
    ``speed`` is 0. ``until`` stops the replay at that offset (seconds of recorded time), for a
    screen mid-run. ``now()`` is the replay's position as a recorded wall time, for the views'
    live timers. No Textual here: the console polls it the way it pumps a live session.
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
        self.events, self.problems = read_journal(path)
        self.speed = speed
        self.until = until
        self.clock = clock or time.monotonic
        self.state = RunState()
        self.t0 = self.events[0].t if self.events else 0.0
        self.t_end = self.events[-1].t if self.events else 0.0
        self.applied = 0
        self._start: float | None = None

    @property
    def label(self) -> str:
        speed = "all at once" if self.speed == 0 else f"×{self.speed:g}"
        return f"replay of {self.run_dir.name} ({speed})"

    def position(self) -> float:
        """Seconds of recorded time played so far."""
        if self._start is None:
            return 0.0
        end = self.t_end - self.t0
        pos = end if self.speed == 0 else (self.clock() - self._start) * self.speed
        if self.until is not None:
            pos = min(pos, self.until)
        return min(pos, end)

    def poll(self, max_events: int = 100_000) -> int:
        """Apply the events that are due; return how many."""
        if self._start is None:
            self._start = self.clock()
        limit = self.position()
        n = 0
        events, state = self.events, self.state
        while self.applied < len(events) and n < max_events and events[self.applied].t - self.t0 <= limit:
            state.apply(events[self.applied])
            self.applied += 1
            n += 1
        return n

    @property
    def done(self) -> bool:
        """Every event played (a replay stopped by ``until`` is never done)."""
        return self.applied >= len(self.events)

    def now(self) -> float:
        return self.t0 + self.position()

    def stop(self) -> str:
        return "a replay has no workload to stop"

    def export_summary(self) -> Path:
        """Write the summary of what has been replayed so far next to the journal."""
        from neurondesk.views.summary_writer import to_json, to_markdown

        s = build_summary(self.state, self.now())
        out = self.run_dir / "replay-summary.json"
        out.write_text(to_json(s), encoding="utf-8")
        out.with_suffix(".md").write_text(to_markdown(s), encoding="utf-8")
        return out

    def finish(self) -> None:
        """Nothing to flush: a replay writes nothing unless asked to export."""
