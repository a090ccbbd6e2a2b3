"""neuron-monitor starts whenever its executable exists, even when neuron-ls is missing or fails:
a fake neuron-monitor on PATH (a script printing a recorded report) is started and read."""

from __future__ import annotations

import os
import queue
import shutil
import stat
import sys
import time
from pathlib import Path

from conftest import DATA

from neurondesk.collectors import telemetry as tm
from neurondesk.core.events.device_events import NeuronSample

REPORT = DATA / "neuron" / "neuron-monitor-trn1.jsonl"


def fake_monitor(folder: Path) -> None:
    script = folder / "neuron-monitor"
    script.write_text(f"#!{sys.executable}\nimport sys, time\n"
                      f"line = open({str(REPORT)!r}).readline()\n"
                      "while True:\n    sys.stdout.write(line); sys.stdout.flush(); time.sleep(0.5)\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def samples_with(monkeypatch, path: str, inventory: dict) -> list:
    monkeypatch.setattr(tm, "collect_inventory", lambda: inventory)
    monkeypatch.setattr(tm, "inventory_event", lambda inv: None)
    monkeypatch.setattr(tm.builtin, "locate_cache", lambda env: None)
    monkeypatch.setattr(tm.builtin, "NvmlSampler", _NoNvml)
    events: queue.SimpleQueue = queue.SimpleQueue()
    t = tm.Telemetry(lambda e: e is not None and events.put(e), env={"PATH": path})
    t.start(os.getpid())
    seen: list = []
    try:
        t.threads[0].join(20)  # the thread that starts the sources, neuron-monitor or not, then ends
        deadline = time.monotonic() + 20
        while t.monitor is not None and time.monotonic() < deadline and not any(
            isinstance(e, NeuronSample) for e in seen
        ):
            try:
                seen.append(events.get(timeout=1))
            except queue.Empty:
                pass
    finally:
        t.stop()
    return [e for e in seen if isinstance(e, NeuronSample)]


class _NoNvml:
    def open(self) -> str:
        return "no NVML in this test"


def test_neuron_monitor_starts_without_neuron_ls(tmp_path, monkeypatch) -> None:
    fake_monitor(tmp_path)
    no_ls = {"neuron": None, "neuron_reason": "neuron-ls not found", "gpus": []}
    samples = samples_with(monkeypatch, str(tmp_path), no_ls)
    assert samples, "neuron-monitor on PATH was not started when neuron-ls was missing"
    hw = samples[0].hardware_info
    assert hw is not None and hw.device_count and hw.cores_per_device


def test_neither_neuron_ls_nor_neuron_monitor_starts_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tm, "find_neuron_tool", lambda name, path=None: shutil.which(name, path=str(tmp_path)))
    no_ls = {"neuron": None, "neuron_reason": "neuron-ls not found", "gpus": []}
    assert samples_with(monkeypatch, str(tmp_path), no_ls) == []
