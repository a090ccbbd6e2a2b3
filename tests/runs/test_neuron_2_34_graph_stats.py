"""TorchNeuron's graph_stats metric table (issue 27): the documented columns read, each row joined
to the dynamo compile it belongs to (its FX-passes / lowering / compile split), the two variables
set into a private folder of the run when the user has not, the tables read at the workload's exit.

Fixtures (tests/data/neuron/sdk-2.34/graph-stats) and the stand-in script are composed from the
column list of the TorchNeuron metrics documentation (see the folder's README): no Trainium here.
The real run is a real neurondesk run of a real torch.compile program on the CPU whose exit writes
the table the way torch-neuronx does."""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path

import pytest
from conftest import FIXTURES, neurondesk_run

from neurondesk.collectors.devices.graph_stats import (
    GraphStatsFolder,
    metrics_environment,
    parse_table,
    parse_timestamp,
)
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState

SDK = FIXTURES / "sdk-2.34"
TABLES = SDK / "graph-stats"
HEADER = ("graph_id,graph_name,model_name,has_collectives,graph_node_count,timestamp,"
          "torch_neuronx_fx_passes_us,torch_neuronx_lower_us,torch_neuronx_compile_us")


def test_fixture_documented_columns_per_rank_file_and_bad_rows_counted() -> None:
    folder = GraphStatsFolder(TABLES)
    rows = folder.poll(t=9.0)
    assert [(r.rank, r.graph_id, r.graph_name, r.node_count, r.has_collectives) for r in rows] == [
        (0, "3f2a9c1e7b5d4a60", "forward_graph_0", 1834, False),
        (0, "8be07d22c4a19f53", "backward_graph_0", 2410, True),
        (1, "3f2a9c1e7b5d4a60", "forward_graph_0", 1834, False),
    ]
    first = rows[0]
    assert (first.fx_passes_s, first.lower_s, first.compile_s) == (1.204511, 0.80322, 41.302117)
    assert first.model_name == "train_step" and first.timestamp == 1764670000.25
    assert folder.problems == 2  # a row with neither id nor name, a node count that is no number
    assert folder.poll(t=10.0) == []  # rows already read are not read again


def test_timestamps_in_seconds_ms_us_ns_and_iso_are_one_time() -> None:
    for text in ("1764670000.5", "1764670000500", "1764670000500000", "1764670000500000000",
                 "2025-12-02T10:06:40.5+00:00"):
        assert parse_timestamp(text) == pytest.approx(1764670000.5), text
    assert parse_timestamp("") is None and parse_timestamp("soon") is None and parse_timestamp("-3") is None


def test_a_table_without_graph_columns_is_refused_and_other_tables_are_not_read(tmp_path: Path) -> None:
    assert "not a graph_stats table" in parse_table("a,b\n1,2\n", "x.csv").refused
    (tmp_path / "metric_table_op_stats_rank0.csv").write_text(HEADER + "\ng,n,m,0,1,1,1,1,1\n")
    assert GraphStatsFolder(tmp_path).poll(0.0) == []


def _compile(state: RunState, t: float, pid: int, index_shape: int) -> None:
    state.apply(ev.CompileFinished(t=t, source="dynamo", pid=pid, duration_s=1.0, trigger="dynamo",
                                   point=f"dynamo:f:{index_shape}", location="train.py:10",
                                   input_shapes=[[index_shape]]))


def _rows(path: str, rank: int, stamps: list[float]) -> list[dev.NeuronGraphStat]:
    return [dev.NeuronGraphStat(t=500.0, path=path, row=i + 1, rank=rank, graph_id=f"g{i}", graph_name=f"n{i}",
                                node_count=10 * (i + 1), timestamp=ts, fx_passes_s=0.1 * (i + 1), lower_s=0.2,
                                compile_s=3.0 + i) for i, ts in enumerate(stamps)]


def test_rows_join_the_dynamo_compile_of_their_rank_nearest_in_time() -> None:
    state = RunState()
    for pid, rank in ((101, 0), (102, 1)):
        state.apply(ev.ProcessAttached(t=1.0, pid=pid, rank=rank, world_size=2))
    _compile(state, 100.0, 101, 4)
    _compile(state, 160.0, 101, 8)
    _compile(state, 100.5, 102, 4)
    _compile(state, 161.0, 102, 8)
    state.apply(ev.CompileFinished(t=130.0, source="probe", pid=101, duration_s=2.0))  # not dynamo: never joined
    by_index = {c.index: c for c in state.compiles}
    rows0 = _rows("r0.csv", 0, [159.0, 99.0])  # out of order: time decides, not the row order
    rows1 = _rows("r1.csv", 1, [None, None])  # no timestamps: the rank's compiles in order
    for row in [*rows0, *rows1, rows0[0]]:  # the first row again: counted once
        state.apply(row)
    join = state.parts.telemetry.graph_stats
    assert join.rows == 4 and join.unjoined == []
    joined = {(s.rank, s.graph_id): i for i, splits in join.by_compile.items() for s in splits}
    c_for = {k: (by_index[i].pid, by_index[i].t) for k, i in joined.items()}
    assert c_for[(0, "g1")][1] == 100.0 and c_for[(0, "g0")][1] == 160.0
    # rank 1's compiles merged into rank 0's rows ("x 2 ranks"); its rows take them in order
    assert {joined[(1, "g0")], joined[(1, "g1")]} == {joined[(0, "g1")], joined[(0, "g0")]}
    split = join.splits_for(joined[(0, "g0")])[0]
    assert split.total_s == pytest.approx(0.1 + 0.2 + 3.0)
    assert split.words() == "n0: FX passes 0.10 s · lowering 0.20 s · Neuron compile 3.00 s (graph g0, 10 nodes, rank 0)"


def test_a_row_without_a_dynamo_compile_is_a_compile_of_its_own() -> None:
    """(issue 34 item 2; what it is and when it counts: tests/runs/test_graph_stats_own_compiles.py)"""
    state = RunState()
    state.apply(_rows("r.csv", 0, [50.0])[0])
    assert [(c.source, c.name) for c in state.compiles] == [("graph_stats", "n0")]
    assert len(state.parts.telemetry.graph_stats.unjoined) == 1


def test_metrics_environment_private_folder_or_the_users_own(tmp_path: Path) -> None:
    extra, folder = metrics_environment({}, tmp_path)
    assert folder == tmp_path / "neuron-metrics"
    assert extra == {"TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats", "TORCH_NEURONX_METRICS_DIR": str(folder)}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    mine = {"TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats,op_stats", "TORCH_NEURONX_METRICS_DIR": "/m"}
    assert metrics_environment(mine, tmp_path) == ({}, Path("/m"))
    assert metrics_environment({"TORCH_NEURONX_METRICS_DIR": "/m"}, tmp_path) == ({}, None)  # graph_stats off
    planted = tmp_path / "other"
    planted.mkdir()
    (tmp_path / "run").mkdir()
    os.symlink(planted, tmp_path / "run" / "neuron-metrics")
    assert metrics_environment({}, tmp_path / "run") == ({}, None)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed here")
def test_real_run_sets_the_variables_reads_the_tables_at_exit_and_joins_them(tmp_path: Path) -> None:
    run = neurondesk_run(tmp_path, [], workload=SDK / "torchneuron_standin.py")
    assert run.returncode == 0, run.stderr[-2000:]
    table = run.run_dir / "neuron-metrics" / "metric_table_graph_stats_rank0.csv"
    assert table.exists(), "the workload was given TORCH_NEURONX_METRICS_DIR in its run folder"
    events = run.events
    rows = [e for e in events if e["kind"] == "neuron_graph_stat"]
    assert [r["graph_id"] for r in rows] == ["g0004", "g0008"]
    finished = next(i for i, e in enumerate(events) if e["kind"] == "run_finished")
    assert all(events.index(r) < finished for r in rows)  # read before the run's end is recorded
    from neurondesk.store.journal import iter_journal
    state = RunState()
    for e in iter_journal(run.run_dir / "events.jsonl", []):
        state.apply(e)
    dynamo = [c for c in state.compiles if c.source == "dynamo"]
    assert len(dynamo) == 2
    splits = [state.parts.telemetry.graph_stats.splits_for(c.index) for c in dynamo]
    assert [[s.graph_id for s in x] for x in splits] == [["g0004"], ["g0008"]]
    assert splits[1][0].compile_s == pytest.approx(0.6)


def test_console_compile_detail_shows_the_fx_lowering_compile_split(tmp_path: Path) -> None:
    """The real console (App.run_test) on a replayed journal: the compile's detail names the split."""
    import asyncio
    import json

    from textual.widgets import DataTable

    from neurondesk.core.events.codec import event_to_dict
    from neurondesk.sources.replay import ReplaySource
    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    events: list[ev.Event] = [ev.RunStarted(t=99.0, run_id="split", command=["python", "train.py"]),
                              ev.ProcessAttached(t=99.5, pid=101, rank=0, world_size=1)]
    events += [ev.CompileFinished(t=100.0 + 60 * i, source="dynamo", pid=101, duration_s=40.0, trigger="dynamo",
                                  point=f"dynamo:f:{n}", location="train.py:10", input_shapes=[[n]])
               for i, n in enumerate((4, 8))]
    events += GraphStatsFolder(TABLES).poll(200.0)[:2]  # rank 0's two rows (timestamps 1764670000.25, .044.9)
    events.append(ev.RunFinished(t=210.0, exit_code=0))
    run = tmp_path / "split"
    run.mkdir()
    (run / "events.jsonl").write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in events))

    async def go() -> str:
        app = ConsoleApp(ReplaySource(run, speed=0), frozen=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            await pilot.press("escape", "c")
            await pilot.pause()
            table = app.query_one("#compile-table", DataTable)
            table.move_cursor(row=0)
            await pilot.pause()
            return app.query_one("#compile-detail", Line).text.plain

    text = asyncio.run(go())
    assert ("TorchNeuron forward_graph_0: FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s "
            "(graph 3f2a9c1e7b5d4a60, 1,834 nodes, rank 0)") in " ".join(text.split())


def test_the_probe_never_calls_torch_neurons_device_synchronising_metrics_on_the_hot_path() -> None:
    """TorchNeuron's documentation: torch.neuron.get_dynamo_metrics() and torch.neuron.memory_stats()
    synchronise the device. The probe (which runs on every step) never calls memory_stats, and calls
    get_dynamo_metrics in one place only: torchneuron_graphs.py's read_graphs, reached from the end of a
    dynamo compile and from the exit, never from a step (issue 44; tests/runs/test_torchneuron_bad_input.py
    counts the calls in a real run: compile ends and the exit, fewer than the steps)."""
    import ast

    from conftest import REPO

    calls = []  # (file, enclosing function) of every call of either, read from the probe's code
    for path in sorted((REPO / "neurondesk" / "probe").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                calls += [(path.name, fn.name) for node in ast.walk(fn) if isinstance(node, ast.Call)
                          and getattr(node.func, "attr", getattr(node.func, "id", None)) in
                          ("get_dynamo_metrics", "memory_stats")]
    # memory_stats only in the device-memory reader (issue 52 item 3): at most once in 10 s at a step end,
    # and at exit (backends/torchneuron_memory.py MEMORY_EVERY_NS), never every step
    assert sorted(set(calls)) == [("torchneuron_graphs.py", "read_graphs"), ("torchneuron_memory.py", "memory_message")]
    reader = (REPO / "neurondesk" / "probe" / "bootstrap" / "_neurondesk_probe" / "backends" / "torchneuron_memory.py")
    assert "MEMORY_EVERY_NS = 10_000_000_000" in reader.read_text()
    backends = REPO / "neurondesk" / "probe" / "bootstrap" / "_neurondesk_probe" / "backends"
    callers = sorted(fn.name for name in ("torchneuron.py", "torchneuron_graphs.py")
                     for fn in ast.walk(ast.parse((backends / name).read_text()))
                     if isinstance(fn, ast.FunctionDef) and fn.name != "read_graphs"
                     and any(getattr(n, "attr", None) == "read_graphs" for n in ast.walk(fn)))
    assert callers == ["after_dynamo_compile", "at_exit"]  # never at_step_end


def test_force_moves_a_previous_runs_metric_tables_aside_so_they_are_never_read_again(tmp_path: Path) -> None:
    from datetime import datetime

    from neurondesk.store.rundir import move_run_aside

    (tmp_path / "events.jsonl").write_text("")
    old = tmp_path / "neuron-metrics"
    old.mkdir()
    (old / "metric_table_graph_stats_rank0.csv").write_text(HEADER + "\ng,n,m,0,1,1,1,1,1\n")
    (tmp_path / "neuron-profile").mkdir()
    aside = move_run_aside(tmp_path, datetime(2026, 12, 2, 1, 0, 0))
    assert (aside / "neuron-metrics" / "metric_table_graph_stats_rank0.csv").exists()
    assert (aside / "neuron-profile").is_dir() and not old.exists()
    _, folder = metrics_environment({}, tmp_path)
    assert GraphStatsFolder(folder).poll(0.0) == []  # the new run's folder starts empty


def test_real_run_leaves_the_users_own_metric_variables_alone_and_says_so(tmp_path: Path) -> None:
    from conftest import base_env

    script = tmp_path / "env.py"
    script.write_text("import os\nprint(os.environ.get('TORCH_NEURONX_METRICS_DIR'), "
                      "os.environ.get('TORCH_NEURONX_ENABLED_METRIC_TABLES'))\n")
    env = {**base_env(tmp_path), "TORCH_NEURONX_METRICS_DIR": str(tmp_path / "mine")}
    run = neurondesk_run(tmp_path, [], workload=script, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (run.run_dir / "stdout.log").read_text() == f"{tmp_path / 'mine'} None\n"
    assert any("set by you without graph_stats" in n and "not read" in n for n in run.summary["notices"])


def test_a_fifo_or_a_link_among_the_tables_is_refused_never_waited_on(tmp_path: Path) -> None:
    from neurondesk.collectors.devices.graph_stats import read_table

    os.mkfifo(tmp_path / "metric_table_graph_stats_rank0.csv")  # is_file() skips it; read_table refuses it
    assert "FIFO" in read_table(tmp_path / "metric_table_graph_stats_rank0.csv").refused
    os.symlink(TABLES / "metric_table_graph_stats_rank1.csv", tmp_path / "metric_table_graph_stats_rank1.csv")
    assert read_table(tmp_path / "metric_table_graph_stats_rank1.csv").refused is not None
    assert GraphStatsFolder(tmp_path).poll(0.0) == []
