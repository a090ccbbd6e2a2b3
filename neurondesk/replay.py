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
