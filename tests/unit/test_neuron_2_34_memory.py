"""Neuron device memory by category (issue 27): neuron-monitor's ``memory_used`` per NeuronCore
(constants, model_code, model_shared_scratchpad, runtime_memory, tensors) and on the host
(constants, dma_buffers, tensors) reduced into peaks and the HBM headroom, and drawn as a stacked
bar per core in the real console's Devices panel (App.run_test on a replayed journal).

The stream is a fixture composed from the neuron-monitor user guide's ``memory_used`` schema
(tests/data/neuron/sdk-2.34/README.md): two runtimes of a trn1.2xlarge, core 1 nearest full."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from neurondesk.collectors.devices.inventory import inventory_event
from neurondesk.collectors.devices.neuron_ls import parse_file
from neurondesk.collectors.devices.neuron_monitor import parse_report
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState

STREAM = FIXTURES / "sdk-2.34" / "neuron-monitor-trn1.2xlarge-memory-by-category.jsonl"
MiB, GiB = 2**20, 2**30


def _events() -> list[ev.Event]:
    inv = parse_file(FIXTURES / "neuron-ls-trn1.2xlarge.json")
    out: list[ev.Event] = [ev.RunStarted(t=1000.0, run_id="mem", command=["train.py"]),
                           inventory_event({"neuron": inv.to_dict(), "gpus": [], "cpu": {}}, t=1000.5)]
    for i, line in enumerate(STREAM.read_text().splitlines()):
        s = parse_report(line, 1001.0 + i)
        assert isinstance(s, dev.NeuronSample)
        out.append(s)
    return out


def test_peaks_per_category_host_and_the_tightest_cores_headroom() -> None:
    state = RunState()
    for e in _events():
        state.apply(e)
    tel = state.parts.telemetry
    assert tel.neuron_memory.category_peaks() == {
        "tensors": 13 * GiB + 512 * MiB, "constants": 64 * MiB, "model_code": 176 * MiB,
        "model_shared_scratchpad": 512 * MiB, "runtime_memory": 34816}
    # the host's categories, the two runtimes summed in each report, the peak over reports
    assert tel.neuron_memory.host_peaks() == {"tensors": 12 * MiB, "constants": 6 * MiB, "dma_buffers": 16 * MiB}
    room = tel.hbm_headroom()
    assert room is not None and room.core == 1 and room.capacity_bytes == 16 * GiB
    assert room.peak_bytes == 13 * GiB + 512 * MiB + (64 + 176 + 512) * MiB + 34816
    assert room.free_fraction == pytest.approx((16 * GiB - room.peak_bytes) / (16 * GiB))


def test_no_capacity_no_headroom_and_no_memory_no_peaks() -> None:
    state = RunState()
    for e in _events()[2:]:  # no neuron-ls; the stream's neuron_hardware_info still gives the capacity
        state.apply(e)
    assert state.parts.telemetry.hbm_headroom().capacity_bytes == 16 * GiB
    empty = RunState()
    empty.apply(dev.NeuronSample(t=1.0, cores=[dev.NeuronCoreSample(core=0, utilization=5.0)]))
    assert empty.parts.telemetry.neuron_memory.category_peaks() == {}
    assert empty.parts.telemetry.hbm_headroom() is None


def test_console_devices_panel_draws_a_stacked_bar_per_core_and_the_headroom(tmp_path: Path) -> None:
    from neurondesk.sources.replay import ReplaySource
    from neurondesk.store.journal import JournalWriter
    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    run = tmp_path / "run"
    run.mkdir()
    w = JournalWriter(run / "events.jsonl")
    for e in _events():
        w.write(e)
    w.close()

    async def go() -> str:
        app = ConsoleApp(ReplaySource(run, speed=0), frozen=True, poll_s=0.25)
        async with app.run_test(size=(160, 48)) as pilot:
            deadline = time.monotonic() + 20
            while "memory by category" not in app.query_one("#devices-text", Line).text.plain:
                assert time.monotonic() < deadline, app.query_one("#devices-text", Line).text.plain
                await pilot.pause(0.2)
            return app.query_one("#devices-text", Line).text.plain

    text = asyncio.run(go())
    lines = text.splitlines()
    bars = [ln for ln in lines[lines.index("  memory by category") + 1:] if ln.strip().startswith(("nc0", "nc1"))]
    assert [b.split()[0] for b in bars] == ["nc1", "nc0"]  # the fullest first
    assert bars[0].rstrip().endswith("10.7G/16G") and bars[1].rstrip().endswith("9.7G/16G")  # the latest report
    assert bars[0].count("█") > bars[1].count("█")
    assert "■ tensors" in text and "■ shared scratchpad" in text
    peak = " ".join(" ".join(lines[next(i for i, ln in enumerate(lines) if "peak per core" in ln):]).split())
    assert "tensors 13.5G" in peak and "model code 176M" in peak and "shared scratchpad 512M" in peak
    assert "HBM headroom 1.8 GiB (11%) on nc1 at its peak" in peak
