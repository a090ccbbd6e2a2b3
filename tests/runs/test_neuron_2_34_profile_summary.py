"""A Neuron Explorer capture (``run --neuron-profile``) and summary.json's ``neuron`` section
(issue 27). The inspect variables and the viewer command follow the Neuron Explorer pages
("Neuron Explorer Environment Variables", "Get started"; see tests/data/neuron/sdk-2.34/README.md);
no Neuron runtime here, so the real run checks what the workload is given and what the summary
says, not a capture."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from conftest import FIXTURES, neurondesk_run

from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.neuron_profile import profile_setup, torch_profiler_use
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.reports.summary_writer import to_markdown

SDK = FIXTURES / "sdk-2.34"
PROFILED = '''import os
import torch.profiler  # the Neuron docs: do not use this with NEURON_RT_INSPECT_ENABLE=1

for v in ("NEURON_RT_INSPECT_ENABLE", "NEURON_RT_INSPECT_SYSTEM_PROFILE", "NEURON_RT_INSPECT_OUTPUT_DIR"):
    print(v, os.environ.get(v), flush=True)
'''


def test_neuron_profile_sets_the_three_variables_into_a_private_folder(tmp_path: Path) -> None:
    setup = profile_setup({}, tmp_path, True, ["python", "x.py"], str(tmp_path), 5.0)
    folder = tmp_path / "neuron-profile"
    assert setup.env == {"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_SYSTEM_PROFILE": "1",
                         "NEURON_RT_INSPECT_OUTPUT_DIR": str(folder)}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert setup.event.open_command == f"neuron-explorer view -d {folder}" and setup.warnings == []
    assert profile_setup({}, tmp_path, False, ["python", "x.py"], None, 5.0).event is None  # not asked, not on


def test_the_users_own_switch_is_named_and_replacing_it_is_said(tmp_path: Path) -> None:
    own = profile_setup({"NEURON_RT_INSPECT_ENABLE": "1"}, tmp_path, False, ["python", "x.py"], str(tmp_path), 1.0)
    assert own.env == {} and own.event.folder == str(tmp_path / "output") and own.event.requested is False
    mine = profile_setup({"NEURON_RT_INSPECT_OUTPUT_DIR": "/elsewhere"}, tmp_path, True, ["python", "x.py"], None, 1.0)
    assert mine.warnings == [f"--neuron-profile replaces your NEURON_RT_INSPECT_OUTPUT_DIR (the capture goes to "
                             f"{tmp_path / 'neuron-profile'})"]


def test_torch_profiler_in_the_script_is_found_at_its_line_comments_are_not(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\n# torch.profiler would conflict\nwith torch.profiler.profile() as p:\n    pass\n")
    assert torch_profiler_use(["torchrun", "--nproc-per-node", "2", "train.py"], str(tmp_path)) == "train.py:3"
    script.write_text("from torch import nn, profiler\n")
    assert torch_profiler_use([str(script)], None) == "train.py:1"
    script.write_text("import torch  # torch.profiler\n")
    assert torch_profiler_use(["python", str(script)], None) is None
    assert torch_profiler_use(["python", "-c", "pass"], None) is None


def test_real_run_with_neuron_profile_gives_the_workload_the_variables_and_the_summary_the_folder(
        tmp_path: Path) -> None:
    script = tmp_path / "profiled.py"
    script.write_text(PROFILED)
    run = neurondesk_run(tmp_path, [], nd_args=["--neuron-profile"], workload=script)
    assert run.returncode == 0, run.stderr[-2000:]
    folder = run.run_dir / "neuron-profile"
    printed = (run.run_dir / "stdout.log").read_text().splitlines()
    assert printed == ["NEURON_RT_INSPECT_ENABLE 1", "NEURON_RT_INSPECT_SYSTEM_PROFILE 1",
                       f"NEURON_RT_INSPECT_OUTPUT_DIR {folder}"]
    profile = run.summary["neuron"]["profile"]
    assert profile == {"folder": str(folder), "open_command": f"neuron-explorer view -d {folder}", "requested": True,
                       "torch_profiler_at": "profiled.py:2"}
    assert any("torch.profiler at profiled.py:2 are both on" in n for n in run.summary["notices"])
    md = (run.run_dir / "summary.md").read_text()
    assert f"| Neuron Explorer capture | {folder}; open it with `neuron-explorer view -d {folder}`" in md


def test_summary_neuron_section_memory_headroom_logs_and_compile_split() -> None:
    from test_neuron_2_34_memory import _events

    state = RunState()
    for e in _events():
        state.apply(e)
    parser = OutputParser()
    for line in (SDK / "runtime-device-oom-as-pasted.log").read_text().splitlines():
        for e in parser.feed("stderr", line, 1100.0):
            state.apply(e)
    state.apply(ev.CompileFinished(
        t=1050.0, source="dynamo", pid=None, duration_s=3.0, trigger="dynamo", point="dynamo:f"))
    state.apply(dev.NeuronGraphStat(t=1200.0, path="r0.csv", row=1, rank=0, graph_id="3f2a", fx_passes_s=1.2,
                                    lower_s=0.8, compile_s=41.3, timestamp=1049.0))
    s = run_summary(state)
    n = json.loads(json.dumps(s.as_dict()))["neuron"]
    assert n["memory_peak_bytes"]["tensors"] == 13 * 2**30 + 512 * 2**20
    assert n["host_memory_peak_bytes"] == {"tensors": 12 * 2**20, "constants": 6 * 2**20, "dma_buffers": 16 * 2**20}
    assert n["hbm_headroom"]["core"] == "1" and n["hbm_headroom"]["free_fraction"] == 0.1103
    assert n["memory_logs"] == ["/tmp/nrt_mem_log_device_0_6934a1f7.csv"]
    assert n["compile_splits"] == [{"compile": 1, "rank": 0, "graph_id": "3f2a", "graph_name": None,
                                    "fx_passes_s": 1.2, "lower_s": 0.8, "compile_s": 41.3,
                                    "node_count": None, "has_collectives": None}]  # a graph_stats row without them
    md = to_markdown(s)
    assert "| Neuron memory peak per core | tensors 13.5 GiB, constants 64.0 MiB, model code 176.0 MiB" in md
    assert "| HBM headroom | 1.8 GiB (11.0%) on nc1 at its peak of 14.2 GiB / 16.0 GiB |" in md
    assert "| Neuron allocation log | /tmp/nrt_mem_log_device_0_6934a1f7.csv |" in md
    assert "- compile 1, rank 0: FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s (graph 3f2a)" in md
    assert run_summary(RunState()).as_dict()["neuron"] is None  # a run that saw none of it has no section


def test_console_devices_panel_names_the_capture_and_the_conflict(tmp_path: Path) -> None:
    import asyncio

    from neurondesk.sources.replay import ReplaySource
    from neurondesk.store.journal import JournalWriter
    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    run = tmp_path / "run"
    run.mkdir()
    w = JournalWriter(run / "events.jsonl")
    w.write(ev.RunStarted(t=1000.0, run_id="prof", command=["python", "train.py"]))
    w.write(dev.NeuronProfileCapture(t=1000.1, folder="/runs/r/neuron-profile",
                                     open_command="neuron-explorer view -d /runs/r/neuron-profile",
                                     torch_profiler_at="train.py:3"))
    w.close()

    async def go() -> str:
        app = ConsoleApp(ReplaySource(run, speed=0), frozen=True, poll_s=0.25)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.5)
            return app.query_one("#devices-text", Line).text.plain

    text = " ".join(asyncio.run(go()).split())
    assert ("Neuron Explorer capture → /runs/r/neuron-profile · open: neuron-explorer view -d "
            "/runs/r/neuron-profile") in text
    assert "torch.profiler is on too (train.py:3): the two conflict" in text
