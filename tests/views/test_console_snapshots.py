"""Snapshot tests (pytest-textual-snapshot) of the console at fixed sizes, on instant replays of
recorded runs: the replay's clock is the recording's, so nothing on screen depends on when the
test runs; the search box's cursor does not blink (frozen=True).

Update after an intended change: pytest tests/views/test_console_snapshots.py --snapshot-update
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from conftest import DATA

from neurondesk.sources.replay import ReplaySource
from neurondesk.store.journal import read_journal
from neurondesk.views.console.app import ConsoleApp

JOURNALS = DATA / "journals"
TAKEN_WITH = "8.2.8"  # Textual draws a little differently from release to release

pytestmark = pytest.mark.skipif(
    version("textual") != TAKEN_WITH,
    reason=f"snapshots taken with textual {TAKEN_WITH}, this is {version('textual')}: "
           "check the screens by eye, then retake them with --snapshot-update and change TAKEN_WITH")


def app_for(name: str, until_into_first_compile: float | None = None) -> ConsoleApp:
    until = None
    if until_into_first_compile is not None:
        events, _ = read_journal(JOURNALS / name / "events.jsonl")
        started = next(e for e in events if e.kind == "compile_started")
        until = started.t - events[0].t + until_into_first_compile
    return ConsoleApp(ReplaySource(JOURNALS / name, speed=0, until=until), frozen=True)


def test_compile_wall_160x48(snap_compare):
    assert snap_compare(app_for("plain", until_into_first_compile=5.0), terminal_size=(160, 48))


def test_recompiles_panels_160x48(snap_compare):
    assert snap_compare(app_for("dynamic"), press=["escape"], terminal_size=(160, 48))


def test_summary_80x24(snap_compare):
    assert snap_compare(app_for("plain"), terminal_size=(80, 24))


def test_overview_tab_80x24(snap_compare):
    assert snap_compare(app_for("input_bound"), press=["escape"], terminal_size=(80, 24))


def test_summary_with_the_time_breakdown_and_the_loss_160x48(snap_compare):
    assert snap_compare(app_for("dynamic"), terminal_size=(160, 48))
