"""The console on a run whose compiles failed (issue 10 item 5): the compile table's status column,
the failed count and the errors in the panel's figures."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import FIXTURES
from textual.widgets import DataTable

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import event_to_dict
from neurondesk.sources.replay import ReplaySource
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line

# the console under the newest Textual too (make test-latest)
pytestmark = pytest.mark.latest


def _journal(tmp_path, fixture: str):
    p = OutputParser()
    events: list[ev.Event] = [ev.RunStarted(t=99.0, run_id="failures", command=["python", "train.py"])]
    for i, line in enumerate((FIXTURES / fixture).read_text().splitlines()):
        events += p.feed("stderr", line, 100.0 + 0.4 * i)
    events += [*p.flush(104.0), ev.RunFinished(t=104.0, exit_code=1)]
    run = tmp_path / "failures"
    run.mkdir()
    (run / "events.jsonl").write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in events))
    return run


def test_failed_compile_shows_its_status_and_the_errors(tmp_path):
    async def go():
        app = ConsoleApp(ReplaySource(_journal(tmp_path, "neuron-cc-failed-then-passed.log"), speed=0), frozen=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            await pilot.press("escape", "c")
            await pilot.pause()
            table = app.query_one("#compile-table", DataTable)
            rows = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
            return rows, app.query_one("#compile-stats", Line).text.plain

    rows, stats = asyncio.run(go())
    status = [r[6] for r in rows]
    assert status == ["failed", "ok"]
    assert "first 800 ms" in stats  # the successful compile, not the failed one before it
    assert "1 failed" in stats and "errors 1: NCC_EVRF024 Output tensor" in stats
