"""The pulse of a run: what a viewer reads at every poll (four times a second in the console) to decide
whether to draw a frame now: the phase (a compile that starts is drawn at once), how many ranks report,
the alerts to ring. Cheap by design: the frame itself is a RunView (core/view/run_view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.reduce.state import RunState


@dataclass(frozen=True)
class Alerts:
    """The alerts the recorder journalled (notices of source "alert", kept apart from the other
    notices): how many in all, and the messages of the latest ones, oldest first."""

    total: int
    messages: tuple[str, ...]


@dataclass(frozen=True)
class Pulse:
    now: float  # the clock reading the frame is drawn at
    event_count: int
    finished: bool
    phase: str  # "starting" | "compiling" | "running" | "input-bound" | "hung" | "finished"
    phase_words: str  # "compiling #3 for 42 s", "hung at step 120 ...", "finished (exit 0)"
    world: int  # ranks that report (1: one process)
    alerts: Alerts


def alerts_of(state: RunState) -> Alerts:
    log = state.parts.log
    return Alerts(log.alerts_total, tuple(n.message for n in log.alerts))


def pulse(state: RunState, now: float) -> Pulse:
    phase, words = state.phase(now)
    return Pulse(now=now, event_count=state.event_count, finished=state.finished, phase=phase, phase_words=words,
                 world=state.parts.ranks.world, alerts=alerts_of(state))
