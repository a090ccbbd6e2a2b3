"""graph_stats rows that join no dynamo compile (issue 34 item 2): each is a compile of its own
(source graph_stats, cause neuron-compile: graph name, node count, FX / lowering / compile split)
in the console's table, summary.json, summary.md, the HTML report and the Perfetto export; counted
in the totals only when no compile already recorded may hold its time (a dynamo compile, the
compiler's log line, the probe), so a compile is never counted twice.

The 42.5 s case is a real `neurondesk run --graph-stats DIR` of a script that compiles nothing,
DIR holding a table of the user's own (tests/data/neuron/sdk-2.34/graph-stats-unjoined, composed
from the documented columns: no Trainium here)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, base_env, neurondesk_run

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState

UNJOINED = FIXTURES / "sdk-2.34" / "graph-stats-unjoined"
SPLIT_WORDS = "FX passes 1.00 s · lowering 1.50 s · Neuron compile 40.00 s"


def _row(row: int, rank: int | None, ts: float | None, graph: str = "g", compile_s: float = 40.0,
         path: str = "r.csv") -> dev.NeuronGraphStat:
    return dev.NeuronGraphStat(t=9000.0, path=path, row=row, rank=rank, graph_id=graph, graph_name=f"{graph}_name",
                               node_count=2906, timestamp=ts, fx_passes_s=1.0, lower_s=1.5, compile_s=compile_s)


def test_a_row_no_dynamo_compile_takes_is_a_counted_compile_of_its_own() -> None:
    state = RunState()
    state.apply(_row(1, 0, 500.0))
    [c] = state.compiles
    assert (c.source, c.cause, c.name, c.graph_hash, c.node_count, c.counted, c.ranks, c.step, c.t) == (
        "graph_stats", "neuron-compile", "g_name", "g", 2906, True, [0], None, 500.0)
    assert c.duration_s == pytest.approx(42.5)
    assert "joined no dynamo compile" in c.reason and SPLIT_WORDS in c.reason and "2,906 nodes" in c.reason
    assert state.compile_total_s == pytest.approx(42.5) and state.parts.compiles.compile_count == 1
    join = state.parts.telemetry.graph_stats
    assert [s.graph_id for s in join.splits_for(1)] == ["g"] and join.unjoined_rows == 1
    assert c.as_dict()["counted"] is True and c.as_dict()["node_count"] == 2906


def _dynamo(state: RunState, t: float, duration: float) -> None:
    state.apply(ev.CompileFinished(t=t, source="dynamo", pid=101, duration_s=duration, trigger="dynamo",
                                   point="dynamo:f:1", location="train.py:10", input_shapes=[[4]]))


def test_a_row_inside_a_dynamo_compile_already_joined_is_listed_not_counted_twice() -> None:
    """One dynamo compile of 50 s made two Neuron graphs: the first row joins it, the second's
    seconds are inside those 50 s (the backend compiles inside dynamo's compile)."""
    state = RunState()
    state.apply(ev.ProcessAttached(t=1.0, pid=101, rank=0, world_size=1))
    _dynamo(state, 1000.0, 50.0)
    state.apply(_row(1, 0, 999.0, graph="first", compile_s=20.0))  # joins compile #1
    state.apply(_row(2, 0, 990.0, graph="second", compile_s=25.0))  # no dynamo compile left: its own
    assert [c.source for c in state.compiles] == ["dynamo", "graph_stats"]
    own = state.compiles[1]
    assert own.counted is False and "compile #1 (dynamo) may already hold its time" in own.reason
    assert state.compile_total_s == pytest.approx(50.0) and state.parts.compiles.compile_count == 1
    # a row far from every compile recorded is a compile nobody else counted
    state.apply(_row(3, 0, 5000.0, graph="third"))
    assert state.compiles[2].counted is True and state.compile_total_s == pytest.approx(50.0 + 42.5)


def test_a_row_the_compilers_log_line_already_counted_is_not_counted_again() -> None:
    """No probe: the Neuron compiler's log line is the compile's record; its graph_stats row, at the
    same time, is listed with its split but not counted again."""
    state = RunState()
    state.apply(ev.CompileFinished(t=2000.0, source="neuron-log", duration_s=42.0, graph_hash="MODULE_1"))
    state.apply(_row(1, 0, 2001.0))
    assert [(c.source, c.counted) for c in state.compiles] == [("neuron-log", True), ("graph_stats", False)]
    assert state.compile_total_s == pytest.approx(42.0)


def test_a_row_without_a_timestamp_is_counted_only_when_nothing_else_could_hold_it() -> None:
    alone = RunState()
    alone.apply(_row(1, 0, None))
    assert alone.compiles[0].counted is True
    beside = RunState()
    beside.apply(ev.CompileFinished(t=10.0, source="probe", duration_s=3.0))
    beside.apply(_row(1, 0, None))
    assert beside.compiles[1].counted is False and beside.compile_total_s == pytest.approx(3.0)


def test_the_same_graph_on_two_ranks_is_one_row_counted_once() -> None:
    state = RunState()
    state.apply(_row(1, 0, 500.0, path="r0.csv"))
    state.apply(_row(1, 1, 500.4, path="r1.csv", compile_s=41.0))
    [c] = state.compiles
    assert c.ranks == [0, 1] and c.rank_durations == pytest.approx([42.5, 43.5])
    assert state.compile_total_s == pytest.approx(42.5)
    assert [s.rank for s in state.parts.telemetry.graph_stats.splits_for(1)] == [0, 1]


def _console_rows(run_dir: Path) -> tuple[list[list[str]], str, str]:
    from textual.widgets import DataTable

    from neurondesk.sources.replay import ReplaySource
    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    async def go():
        app = ConsoleApp(ReplaySource(run_dir, speed=0), frozen=True)
        async with app.run_test(size=(180, 48)) as pilot:
            await pilot.pause()
            await pilot.press("escape", "c")
            await pilot.pause()
            table = app.query_one("#compile-table", DataTable)
            table.move_cursor(row=0)
            await pilot.pause()
            rows = [[str(getattr(cell, "plain", cell)) for cell in table.get_row_at(i)] for i in range(table.row_count)]
            return (rows, app.query_one("#compile-detail", Line).text.plain,
                    app.query_one("#compile-stats", Line).text.plain)

    return asyncio.run(go())


def test_a_42_5_s_compile_from_the_users_own_folder_shows_everywhere(tmp_path: Path) -> None:
    script = tmp_path / "quiet.py"
    script.write_text("import time\ntime.sleep(2.5)\nprint('done')\n")  # the folder is polled every second
    run = neurondesk_run(tmp_path, [], nd_args=["--graph-stats", str(UNJOINED)], workload=script)
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    [c] = s["compiles"]
    assert (c["source"], c["cause"], c["name"], c["graph_hash"], c["node_count"], c["counted"]) == (
        "graph_stats", "neuron-compile", "train_step_graph_0", "5c0ffee1d2a3b4c5", 2906, True)
    assert c["duration_s"] == pytest.approx(42.5)
    assert s["compile_count"] == 1 and s["compile_total_s"] == pytest.approx(42.5)
    assert s["neuron"]["graph_stats_unjoined"] == 1
    assert [x["compile"] for x in s["neuron"]["compile_splits"]] == [1]

    md = (run.run_dir / "summary.md").read_text()
    row = next(line for line in md.splitlines() if "train_step_graph_0" in line)
    assert "neuron-compile" in row and "42.50 s" in row and SPLIT_WORDS in row and "5c0ffee1d2a3b4c5" in row

    env = base_env(tmp_path)
    page, trace = tmp_path / "report.html", tmp_path / "trace.json"
    for args in (["report", str(run.run_dir), "-o", str(page)],
                 ["export", str(run.run_dir), "--format", "chrome", "-o", str(trace)]):
        p = subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                           env=env, cwd=REPO, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    html = page.read_text()
    assert "train_step_graph_0" in html and "neuron-compile" in html and "42.5" in html
    spans = [x for x in json.loads(trace.read_text())["traceEvents"] if x.get("cat") == "compile"]
    [span] = spans
    assert span["args"]["name"] == "train_step_graph_0" and span["args"]["source"] == "graph_stats"
    assert span["args"]["node_count"] == 2906 and span["dur"] == pytest.approx(42.5e6)

    rows, detail, stats = _console_rows(run.run_dir)
    assert len(rows) == 1 and "train_step_graph_0" in rows[0] and "neuron-compile" in rows[0]
    assert "graph_stats" in rows[0] and any("42.50" in cell for cell in rows[0])
    assert f"TorchNeuron train_step_graph_0: {SPLIT_WORDS}" in " ".join(detail.split()) and "2,906 nodes" in detail
    assert "compiles 1" in " ".join(stats.split())
