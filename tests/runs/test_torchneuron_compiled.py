"""torch.compile(backend="neuron") on TorchNeuron (issue 44 item 4): one real `neurondesk run` under torch
2.13, the TorchNeuron double (tests/torchneuron_double/) playing the backend and get_dynamo_metrics on
the CPU, of a script whose forward prints (a graph break: two graphs) and whose batch grows at step 15
(a recompile of both). Every graph joins the dynamo compile that made it; the recompile shows its new
and old shapes; the graph break names what broke, as torch 2.13 says it on the lines after its first."""

from __future__ import annotations

import asyncio
import json

import pytest
from torch213 import SCRIPTS, run_torchneuron, torchneuron_env

SCRIPT = SCRIPTS / "compiled_break.py"
LINE_CALL, LINE_PRINT = 28, 18  # the script's `compiled(x)` and the `print` inside its forward


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    home = tmp_path_factory.mktemp("tncompile")
    run = run_torchneuron(home / "run", SCRIPT, [], torchneuron_env(home))
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    return run


def _dynamo(summary: dict) -> list[dict]:
    return [c for c in summary["compiles"] if c["source"] == "dynamo"]


def test_every_graph_joins_the_dynamo_compile_that_made_it_once(run):
    s = run.summary
    truth = [e for e in run.events if e["kind"] == "neuron_graph_stat" and e["path"] == "get_dynamo_metrics"]
    names = {e["graph_name"]: e for e in truth}
    assert len(names) == 8  # two frames (the break) x forward and backward, compiled twice (step 15)
    listed = [g for c in s["compiles"] for g in c["graphs"]]
    assert sorted(g["graph_name"] for g in listed) == sorted(names)  # each graph in one compile, once
    for g in listed:
        e = names[g["graph_name"]]
        assert (g["node_count"], g["graph_id"], g["has_collectives"]) == (e["node_count"], e["graph_id"], False)
        assert g["compile_s"] == pytest.approx(e["compile_s"]) and g["compile_s"] > 0  # the NEFF compile time
    for c in s["compiles"]:
        if c["graphs"]:
            assert c["source"] == "dynamo" and c["duration_s"] > 0  # dynamo's time beside TorchNeuron's
            assert c["node_count"] == sum(g["node_count"] for g in c["graphs"])
    # the graph_stats table (read at exit) and get_dynamo_metrics are the same graphs: counted once
    assert s["neuron"]["graph_stats_unjoined"] == 0 and s["compile_count"] == len(_dynamo(s))
    assert len(s["neuron"]["compile_splits"]) == len(names) == s["neuron"]["neff_cache"]["graph_neffs"]
    table = [e for e in run.events if e["kind"] == "neuron_graph_stat" and e["path"] != "get_dynamo_metrics"]
    assert {e["graph_id"] for e in table} == {e["graph_id"] for e in truth}


def test_the_recompile_lists_its_forward_and_backward_with_the_new_and_old_shapes(run):
    late = [c for c in _dynamo(run.summary) if c["step"] == 15]
    assert len(late) == 2 and all(c["recompile"] and c["cause"] == "shape-change" for c in late)
    for c in late:
        assert c["input_shapes"] == [[6, 8]] and c["previous_shapes"] == [[4, 8]]
        assert sorted(g["graph_name"].split("_")[2] for g in c["graphs"]) == ["backward", "forward"]
    first = next(c for c in _dynamo(run.summary) if c["step"] == 0)
    assert first["input_shapes"] == [[4, 8]] and first["cause"] == "first"
    assert [g["graph_name"].split("_")[2] for g in first["graphs"]] == ["forward"]  # its backward compiles lazily


def test_the_graph_break_names_the_print_its_hint_registry_id_and_line(run):
    s = run.summary
    where = f"{SCRIPT}:{LINE_PRINT}"
    breaks = s["graph_breaks"]
    assert [b["step"] for b in breaks] == [0, 15]  # the first compile and the recompile of the frame
    for b in breaks:
        assert b["location"] == where and b["registry_id"] == "gb0059"
        assert b["reason"] == "Failed to trace builtin operator"  # not "Encountered graph break when ..."
        assert "builtin operator `print`" in b["explanation"] and "print" in b["hints"][0]
    broke = [c for c in _dynamo(s) if c["graph_break"]]
    assert [(c["step"], c["location"]) for c in broke] == [(0, f"{SCRIPT}:{LINE_CALL}"), (15, f"{SCRIPT}:{LINE_CALL}")]
    words = broke[0]["graph_break"]
    assert words.startswith(f"Failed to trace builtin operator at {where}: Dynamo does not know how to trace "
                            "builtin operator `print`") and "(gb0059); hint: Avoid calling builtin `print`" in words


def test_the_consoles_compile_detail_says_the_break_the_shapes_and_the_graphs(run):
    """The real console (App.run_test) replaying the run's journal: the step-15 recompile's detail."""
    from textual.widgets import DataTable

    from neurondesk.sources.replay import ReplaySource
    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    row = next(i for i, c in enumerate(run.summary["compiles"]) if c["step"] == 15 and c["graph_break"])

    async def go() -> str:
        app = ConsoleApp(ReplaySource(run.run_dir, speed=0), frozen=True)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.pause()
            await pilot.press("escape", "c")
            await pilot.pause()
            app.query_one("#compile-table", DataTable).move_cursor(row=row)
            await pilot.pause()
            return app.query_one("#compile-detail", Line).text.plain

    text = " ".join(asyncio.run(go()).split())
    assert "shapes 4×8 → 6×8" in text, text  # the old shape, then the new
    assert "graph break Failed to trace builtin operator" in text and "(gb0059)" in text, text
    assert "TorchNeuron model_0_forward_" in text and "TorchNeuron model_0_backward_" in text, text
    assert json.loads((run.run_dir / "summary.json").read_text())["compiles"][row]["graphs"]
