"""Issue 14's views on recorded real runs (tests/data/journals/, XLA on the CPU): `neurondesk
advise`, the advice in the Compiles panel, the time breakdown's bar (console, summary screen) and
its rows in `compare`, the step-time and loss charts' series, the Ranks row and help line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from textual.widgets import DataTable

from neurondesk.cli import main
from neurondesk.recorder.replay import ReplaySource, state_from_run_dir
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line

JOURNALS = Path(__file__).parent / "data" / "journals"
WIDE, SMALL = (160, 48), (80, 24)


def run_app(name: str, size, script):
    async def go():
        app = ConsoleApp(ReplaySource(JOURNALS / name, speed=0), frozen=True)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return await script(app, pilot)

    return asyncio.run(go())


def text(app, selector: str) -> str:
    return app.query_one(selector, Line).text.plain


def advise_json(name: str, capsys) -> list[dict]:
    assert main(["advise", str(JOURNALS / name), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------- neurondesk advise
def test_advise_a_dynamic_shape_run_proposes_fewer_graphs_and_its_figures_add_up(capsys):
    advice = advise_json("dynamic", capsys)
    buckets = [a for a in advice if a["kind"] == "shape-buckets"]
    assert len(buckets) == 1
    a = buckets[0]
    state, _ = state_from_run_dir(JOURNALS / "dynamic")
    at_point = [c for c in state.compiles if c.location == a["location"] and c.phase != "eval"]
    assert any(c.cause == "shape-change" for c in at_point)
    assert a["graphs_today"] == len(at_point) == 25
    durations = [c.duration_s for c in at_point]
    assert a["mean_compile_s"] == pytest.approx(sum(durations) / len(durations), abs=1e-3)
    proposed = a["proposed"]
    assert proposed["graphs"] < a["graphs_today"]
    assert proposed in a["plans"]
    for plan in a["plans"]:
        assert plan["compile_saved_s"] == pytest.approx(
            (a["graphs_today"] - plan["graphs"]) * a["mean_compile_s"], rel=1e-3, abs=0.01)
        assert plan["net_saved_s"] == pytest.approx(plan["compile_saved_s"] - plan["step_time_added_s"], abs=0.002)
        assert max(plan["buckets"]) >= max(map(int, a["values"]))  # every value fits in a bucket
    # the histogram counts the steps (one shape each) of the run
    assert sum(a["values"].values()) == state.steps_done
    assert a["dimension"] == 1

    assert main(["advise", str(JOURNALS / "dynamic")]) == 0
    out = capsys.readouterr().out
    assert "pad the sequence length (dim 1) at " in out and "train.py:" in out
    assert f"{proposed['graphs']} graphs instead of 25" in out
    assert "powers of two" in out and "◀" in out


def test_advise_a_run_with_no_shape_change_has_no_bucket_advice(capsys):
    assert not [a for a in advise_json("plain", capsys) if a["kind"] == "shape-buckets"]
    assert main(["advise", str(JOURNALS / "plain")]) == 0
    assert capsys.readouterr().out.startswith("no advice")


def test_advise_an_item_run_names_the_line_and_the_step_closure(capsys):
    advice = advise_json("item", capsys)
    reads = [a for a in advice if a["kind"] == "value-access"]
    assert reads and reads[0]["location"].endswith(".py:70") and "train.py" in reads[0]["location"]
    assert "xm.add_step_closure" in reads[0]["message"]
    assert reads[0]["location"] in reads[0]["message"]
    assert not [a for a in advice if a["kind"] == "shape-buckets"]


def test_advise_a_folder_without_a_journal_says_what_to_give(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["advise", str(tmp_path)])
    assert exc.value.code == 2
    assert "events.jsonl not found" in capsys.readouterr().err


# ---------------------------------------------------------------------------- Compiles panel
def test_compiles_panel_shows_the_bucket_advice_for_a_shape_change_row():
    async def script(app, pilot):
        await pilot.press("escape", "c")
        await pilot.press("ctrl+end")
        await pilot.pause()
        return text(app, "#compile-advice")

    shown = run_app("dynamic", WIDE, script)
    assert "shape buckets: pad the sequence length (dim 1) at train.py:" in shown
    assert "graphs instead of 25" in shown
    assert "/work/" not in shown  # the short location in the panel


def test_compiles_panel_shows_the_value_access_advice_on_its_line():
    async def script(app, pilot):
        await pilot.press("escape", "c")
        table = app.query_one("#compile-table", DataTable)
        found = []
        for i in range(table.row_count):
            table.move_cursor(row=i, animate=False)
            await pilot.pause()
            found.append(text(app, "#compile-advice"))
        return found

    shown = run_app("item", WIDE, script)
    assert any("value read inside the step" in s and "add_step_closure" in s for s in shown)
