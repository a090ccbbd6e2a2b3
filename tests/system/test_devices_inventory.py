"""``neurondesk devices``: collect_inventory and its text, with what this machine really has
(no Neuron, no NVIDIA) and with neuron-ls fixtures (a saved file and a fake binary)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES

from neurondesk.collectors.devices.inventory import collect_inventory, format_inventory_text, inventory_event
from neurondesk.collectors.devices.neuron_ls import NOT_FOUND
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.device_events import DeviceInventory


def test_this_machine_says_why_neuron_and_gpu_are_absent(tmp_path: Path) -> None:
    d = collect_inventory(search_path=str(tmp_path), bin_dir=str(tmp_path / "none"))
    assert d["neuron"] is None and d["neuron_reason"] == NOT_FOUND
    assert d["gpus"] == [] and d["gpu_reason"].startswith("NVML not available")
    assert d["cpu"]["logical_cores"] >= 1
    text = format_inventory_text(d)
    lines = text.splitlines()
    assert lines[0] == f"Neuron: none ({NOT_FOUND})"
    assert lines[1] == f"GPU: none ({d['gpu_reason']})"
    assert lines[2].startswith("CPU: ") and f"{d['cpu']['logical_cores']} logical" in lines[2]
    assert json.loads(json.dumps(d)) == d  # --json prints it as is


def test_fixture_inventory_from_a_saved_neuron_ls_file() -> None:
    d = collect_inventory(neuron_ls_file=str(FIXTURES / "neuron-ls-trn1.32xlarge.txt"))
    assert d["neuron"]["total_cores"] == 32 and d["neuron_reason"] is None
    lines = format_inventory_text(d).splitlines()
    assert lines[0] == "Neuron: 16 device(s), 32 NeuronCore(s) on trn1.32xlarge i-0c5d2e8f4a1b3c7d9"
    assert lines[1] == (
        "  device 0: 2 cores, ids 0-1, 32.0 GiB, bdf 0000:10:1b.0, cpus 0-31,64-95, numa 0, pids 52101,52102"
    )
    assert lines[16].startswith("  device 15: 2 cores, ids 30-31")


def test_fixture_inventory_event_round_trips_through_the_journal() -> None:
    d = collect_inventory(neuron_ls_file=str(FIXTURES / "neuron-ls-trn1.2xlarge.json"))
    event = inventory_event(d, t=3.0)
    assert isinstance(event, DeviceInventory) and event.neuron.devices[0].numa_node == -1
    assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event


def test_unreadable_saved_file_and_driver_failure_are_reasons(tmp_path: Path) -> None:
    bad = tmp_path / "ls.out"
    bad.write_text("{ truncated")
    d = collect_inventory(neuron_ls_file=str(bad))
    assert d["neuron"] is None and str(bad) in d["neuron_reason"]
    fake = tmp_path / "neuron-ls"
    fake.write_text(f'#!/bin/sh\ncat "{FIXTURES / "neuron-ls-no-driver.stderr.txt"}" >&2\nexit 1\n')
    fake.chmod(0o755)
    d = collect_inventory(neuron_ls=str(fake))
    first = format_inventory_text(d).splitlines()[0]
    assert first.startswith("Neuron: none (Neuron driver not loaded: time=") and "failed to discover" in first


def test_gpu_lines_in_the_text() -> None:
    d = {
        "neuron": None,
        "neuron_reason": NOT_FOUND,
        "gpus": [
            {"index": 0, "name": "NVIDIA H200", "memory_total": 141 * 2**30, "power_limit_w": 700.0},
            {"index": 1, "error": "GPU is lost"},
        ],
        "gpu_driver": "570.86.15",
        "gpu_reason": None,
        "cpu": {},
    }
    lines = format_inventory_text(d).splitlines()
    assert lines[1:4] == [
        "GPU: 2 device(s), driver 570.86.15",
        "  gpu 0: NVIDIA H200, 141.0 GiB, 700 W limit",
        "  gpu 1: error: GPU is lost",
    ]
    assert lines[4] == "CPU: unknown model (?), ? logical / ? physical cores, ? memory"


def test_empty_device_list_is_a_reason(tmp_path: Path) -> None:
    saved = tmp_path / "ls.json"
    saved.write_text("[]")
    d = collect_inventory(neuron_ls_file=str(saved))
    assert d["neuron"] is None and d["neuron_reason"] == "neuron-ls lists no Neuron devices"
