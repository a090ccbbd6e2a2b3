"""A run's RunState rebuilt from its folder alone: the newest usable checkpoint (store/checkpoint.py),
then the journal after it, through the same reducer a live run uses. Replay, follow, `ls`, the
summary and the job summary all start here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import Summary
from neurondesk.store.checkpoint import best_checkpoint, fallback_words, replace_unusable
from neurondesk.store.fallback import find_fallback, is_fallback_dir, open_whole_journal
from neurondesk.store.journal import JournalProblem, iter_journal, iter_journal_stream
from neurondesk.store.rundir import RunPaths


def resume(run_dir: Path, events: Path, until_t: float | None = None,
           notes: list[str] | None = None, why_not: list[str] | None = None) -> tuple[RunState, tuple[int, int]]:
    """The state to start from and the journal position to read on from: the newest usable
    checkpoint's, else a fresh state at the start. Why a checkpoint that was there could not be
    used goes in ``notes`` (one line); with ``why_not``, there instead, each reason (the caller
    says it)."""
    if why_not is not None:
        found = best_checkpoint(run_dir, events, until_t, why_not)
        return (RunState(), (0, 0)) if found is None else (found.state, found.position)
    why_not = []
    found = best_checkpoint(run_dir, events, until_t, why_not)
    if found is None:
        words = fallback_words(why_not)
        if words and notes is not None:
            notes.append(words)
        return RunState(), (0, 0)
    if why_not and notes is not None:
        notes.append(f"checkpoint not used, {why_not[0]}: started from {found.path.name} instead")
    return found.state, found.position


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
    path = journal_of(run_dir)
    if target_loss is not None:  # reduced as if started otherwise: no checkpoint holds that
        return _reduce(iter_journal(path, problems), target_loss), problems
    why_not: list[str] = []
    state, start = resume(run_dir, path, why_not=why_not)
    state = _reduce(iter_journal(path, problems, start), None, state)
    if why_not and notes is not None:  # a checkpoint was there and not used: rebuilt once where it can be
        whole = not any(p.line == 0 for p in problems)  # a segment missing: no checkpoint of what is left
        repaired = replace_unusable(run_dir, state, path, why_not) if whole else None
        notes.append(repaired or _not_used_words(why_not, start))
    if notes is not None:  # a journal-wide problem (a segment deleted by hand) is a note, not a line
        notes += [p.error for p in problems if p.line == 0]
        problems = [p for p in problems if p.line != 0]
    return state, problems


def _not_used_words(why_not: list[str], start: tuple[int, int]) -> str:
    if start == (0, 0):
        return fallback_words(why_not) or ""
    return f"checkpoint not used, {why_not[0]}: started from an older one instead"


def summary_from_run_dir(run_dir: Path, target_loss: float | None = None,
                         notes: list[str] | None = None) -> tuple[Summary, list[JournalProblem]]:
    """The run's summary rebuilt from its journal (`summary`, `advise`, `compare`, `reindex`)."""
    state, problems = state_from_run_dir(run_dir, target_loss, notes)
    return run_summary(state), problems


def journal_of(run_dir: Path | str) -> Path:
    """The run folder's journal; FileNotFoundError (its message for the user) when it has none."""
    path = RunPaths(run_dir).events
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: give a run folder made by `neurondesk run` (see `neurondesk history`)")
    return path


def _reduce(events, target_loss: float | None, state: RunState | None = None) -> RunState:
    state = RunState() if state is None else state
    for e in events:
        if target_loss is not None and isinstance(e, ev.RunStarted):
            e = dataclasses.replace(e, target_loss=target_loss)
        state.apply(e)
    return state
