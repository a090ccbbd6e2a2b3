"""Issue 14's views on recorded real runs (tests/data/journals/, XLA on the CPU): `neurondesk
advise`, the advice in the Compiles panel, the time breakdown's bar (console, summary screen) and
its rows in `compare`, the step-time and loss charts' series, the Ranks row and help line."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import DATA
from textual.widgets import DataTable

from neurondesk.cli.main import main
from neurondesk.core.figures.series import rolling_median, rolling_quantiles, step_time_line
from neurondesk.core.figures.time_breakdown import SLICES
from neurondesk.core.rules.compare import compare
from neurondesk.sources.rebuild import state_from_run_dir, summary_from_run_dir
from neurondesk.sources.replay import ReplaySource
from neurondesk.views.console.advice_panels import breakdown_bar, breakdown_legend
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line

JOURNALS = DATA / "journals"
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
    assert f"{proposed['graphs']} graph{'s' if proposed['graphs'] > 1 else ''} instead of 25" in out
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
    assert " instead of 25" in shown
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


# ---------------------------------------------------------------------------- time breakdown
@pytest.mark.parametrize("name", ["plain", "dynamic", "item", "input_bound"])
def test_time_breakdown_of_each_recorded_run_adds_up_to_its_wall_time(name):
    s, _ = summary_from_run_dir(JOURNALS / name)
    slices = s.time_breakdown
    assert [x.name for x in slices] == list(SLICES)
    assert sum(x.seconds for x in slices) == pytest.approx(s.elapsed_s, abs=1.0)
    assert sum(x.share for x in slices) == pytest.approx(1.0, abs=0.01)
    assert all(x.seconds >= 0 for x in slices)


def test_breakdown_bar_is_one_line_as_wide_as_asked_with_a_cell_per_slice_that_has_time():
    s, _ = summary_from_run_dir(JOURNALS / "dynamic")
    slices = s.time_breakdown
    for width in (10, 37, 76, 150):
        bar = breakdown_bar(slices, width)
        assert "\n" not in bar.plain and len(bar.plain) == width
        assert len(bar.spans) == sum(1 for x in slices if x.share and x.seconds > 0)
    compile_share = next(x.share for x in slices if x.name == "compile")
    red = next(sp for sp in breakdown_bar(slices, 100).spans if sp.style == "red")
    assert red.end - red.start == pytest.approx(compile_share * 100, abs=2)
    legend = breakdown_legend(slices).plain  # 80 columns: two full entries a line
    assert "compile" in legend and "147.7 s" in legend and "94.8%" in legend and "$0.0551" in legend
    assert "evaluation" not in legend  # no time in it


def test_compare_shows_the_time_breakdown_side_by_side(capsys):
    a, _ = summary_from_run_dir(JOURNALS / "plain")
    b, _ = summary_from_run_dir(JOURNALS / "dynamic")
    c = compare([a, b])
    rows = {r["key"]: r for r in c["rows"] if r["key"].startswith("time:")}
    assert list(rows) == [f"time:{n}" for n in SLICES]
    for i, s in enumerate((a, b)):
        for x in s.time_breakdown:
            row = rows[f"time:{x.name}"]
            assert (row["values"][i], row["shares"][i], row["usd"][i]) == (x.seconds, x.share, x.usd)
    assert all(r["best"] is None for r in rows.values())
    assert main(["compare", str(JOURNALS / "plain"), str(JOURNALS / "dynamic")]) == 0
    md = capsys.readouterr().out
    assert "| time: compile | 12.67 s (45.7%, $0.0047) | 147.72 s (94.8%, $0.0551) |" in md
    assert main(["compare", str(JOURNALS / "plain"), str(JOURNALS / "dynamic"), "--format", "csv"]) == 0
    assert "time:compile,12.669,147.718" in capsys.readouterr().out


# ---------------------------------------------------------------------------- rolling median
def test_rolling_median_and_p90_over_a_trailing_window():
    values = [5.0, 1.0, 3.0, 100.0, 2.0, 4.0]
    assert rolling_median(values, 3) == [5.0, 3.0, 3.0, 3.0, 3.0, 4.0]
    assert rolling_median(values, 2) == [5.0, 3.0, 2.0, 51.5, 51.0, 3.0]
    assert rolling_median(values, 1) == values
    assert rolling_quantiles(values, 3, 0.9) == [5.0, 5.0, 5.0, 100.0, 100.0, 100.0]
    assert rolling_quantiles(values, 100, 0.9) == [5.0, 5.0, 5.0, 100.0, 100.0, 100.0]
    assert rolling_median([], 5) == []
    with pytest.raises(ValueError):
        rolling_median(values, 0)
    # against a direct computation on a longer series with repeated values
    import random
    import statistics

    rng = random.Random(7)
    xs = [float(rng.randint(0, 9)) for _ in range(300)]
    for w in (1, 4, 9, 25):
        assert rolling_median(xs, w) == [statistics.median(xs[max(0, i - w + 1):i + 1]) for i in range(300)]


def test_step_time_line_keeps_compile_steps_apart_and_thins_to_the_chart():
    state, _ = state_from_run_dir(JOURNALS / "dynamic")
    line = step_time_line(state.history)
    compiled = [r for r in state.history if r.compiled]
    assert line.compile_steps == [r.step for r in compiled] and len(compiled) > 20
    assert not set(line.steps) & set(line.compile_steps)
    assert len(line.steps) + len(line.compile_steps) == len(state.history)
    assert all(p >= m for m, p in zip(line.median_s, line.p90_s, strict=True))
    # the steady median is over the same non-compile steps: the line ends near it
    assert max(line.median_s) < min(line.compile_s)
    plain, _ = state_from_run_dir(JOURNALS / "plain")
    thin = step_time_line(plain.history, points=20)
    full = step_time_line(plain.history)
    assert len(thin.steps) <= 20 and thin.steps[-1] == full.steps[-1] and thin.median_s[-1] == full.median_s[-1]


# ---------------------------------------------------------------------------- screens
def test_throughput_panel_draws_the_step_time_line_and_the_loss_beside_it():
    async def script(app, pilot):
        await pilot.press("escape", "t")
        await pilot.pause()
        from textual_plotext import PlotextPlot

        loss = app.query_one("#loss-plot", PlotextPlot)
        return loss.display, loss.plt.build(), app.query_one("#throughput-plot", PlotextPlot).plt.build()

    shown, loss, step = run_app("plain", SMALL, script)
    assert shown and "loss" in loss
    assert "median, p90" in step and "x" in step


def test_summary_screen_shows_where_the_time_went_and_the_loss():
    async def script(app, pilot):
        await pilot.pause()
        screen = app.screen
        return (screen.query_one("#summary-breakdown").render().plain, len(screen.query("#summary-loss")))

    breakdown, loss_plots = run_app("plain", WIDE, script)
    assert breakdown.startswith("where the time went\n")
    assert "compile" in breakdown and "45.7%" in breakdown and "$0.0047" in breakdown
    assert loss_plots == 1


def test_help_lists_the_ranks_key():
    from neurondesk.views.console.screens import HELP

    assert "[b]r[/b]  ranks" in HELP


def test_overview_has_a_ranks_row_with_the_straggler_when_there_are_several_ranks():
    from test_console_ranks import app_for as ranks_app

    async def go(size, **kw):
        app = ranks_app(4, **kw)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.press("o")
            await pilot.pause()
            return text(app, "#overview-text")

    def row(shown: str) -> str:
        return next(line for line in shown.splitlines() if line.startswith("Ranks"))

    wide = row(asyncio.run(go((110, 30))))
    assert "4 ranks · slowest 100.0 ms/step · straggler: rank 2 +40 ms before sync (compute)" in wide
    small = asyncio.run(go(SMALL, fail_rank=1))
    assert row(small).startswith("Ranks       4 ranks · rank 1 failed · slowest")  # the failure first
    assert len(row(small)) <= 78 and small.splitlines().index(row(small)) + 1 < len(small.splitlines())
    assert small.splitlines()[small.splitlines().index(row(small)) + 1].startswith("Throughput")  # one line
    single = run_app("plain", SMALL, lambda app, pilot: _overview(app, pilot))
    assert not any(line.startswith("Ranks") for line in single.splitlines())


async def _overview(app, pilot):
    await pilot.press("escape", "o")
    await pilot.pause()
    return text(app, "#overview-text")
