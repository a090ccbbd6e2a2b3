"""``neurondesk devices [--json]``: what accelerators and CPU this machine has, or why not."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from neurondesk.collectors.devices import NEURON_BIN_DIR, human_bytes
from neurondesk.collectors.devices.host import cpu_info
from neurondesk.collectors.devices.neuron_ls import (
    NeuronLsFileTooLarge,
    NeuronLsResult,
    parse_file,
    run_neuron_ls,
)
from neurondesk.collectors.devices.nvml import read_gpus
from neurondesk.core.events.device_events import DeviceInventory


def collect_inventory(
    *,
    neuron_ls: str | None = None,
    search_path: str | None = None,
    bin_dir: str = NEURON_BIN_DIR,
    neuron_ls_file: str | None = None,
    nvml_module: Any = None,
) -> dict[str, Any]:
    """{"neuron": dict|None, "neuron_reason", "gpus": [...], "gpu_driver", "gpu_reason", "cpu"}.

    Plain JSON-friendly values (``neurondesk devices --json`` prints them); the keys are
    DeviceInventory's fields, so ``inventory_event(d)`` makes the typed event.
    ``neuron_ls_file`` reads a saved neuron-ls output instead of running the tool.
    """
    if neuron_ls_file is not None:
        try:
            ls = NeuronLsResult(parse_file(neuron_ls_file))
        except NeuronLsFileTooLarge:
            raise  # not an inventory at all: the caller says so and stops
        except ValueError as e:
            ls = NeuronLsResult(None, str(e))
    else:
        ls = run_neuron_ls(neuron_ls, search_path=search_path, bin_dir=bin_dir)
    if ls.inventory is not None and not ls.inventory.devices:
        ls = NeuronLsResult(None, "neuron-ls lists no Neuron devices")
    gpu_sample, gpu_reason = read_gpus(nvml_module)
    gpus = gpu_sample.gpus if gpu_sample is not None else []
    if gpu_sample is not None and not gpus:
        gpu_reason = gpu_sample.error or "NVML found no GPUs"
    return {
        "neuron": ls.inventory.to_dict() if ls.inventory is not None else None,
        "neuron_reason": ls.reason,
        "gpus": msgspec.to_builtins(gpus),
        "gpu_driver": gpu_sample.driver if gpu_sample is not None else None,
        "gpu_reason": gpu_reason,
        "cpu": cpu_info(),
    }


def inventory_event(d: dict[str, Any], t: float | None = None) -> DeviceInventory:
    """The event for ``collect_inventory()``'s dict: its records are built from the dicts, as the
    codec builds them from a journal line (keys a record does not have, like ``total_cores``, are
    ignored)."""
    return msgspec.convert({**d, "t": time.time() if t is None else t}, DeviceInventory)


def _neuron_lines(n: dict[str, Any]) -> list[str]:
    devices = n.get("devices") or []
    where = " ".join(x for x in (n.get("instance_type"), n.get("instance_id")) if x)
    head = f"Neuron: {len(devices)} device(s), {n.get('total_cores', 0)} NeuronCore(s)"
    if n.get("logical_nc_config"):
        head += f", LNC={n['logical_nc_config']}"
    lines = [head + (f" on {where}" if where else "")]
    if n.get("ultraserver"):
        lines.append("  " + ultraserver_text(n["ultraserver"]))
    for d in devices:
        parts = [f"  device {d['index']}: {d['nc_count']} cores"]
        if d.get("core_ids"):
            ids = d["core_ids"]
            parts.append(
                f"ids {ids[0]}-{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) else f"ids {ids}"
            )
        parts.append(human_bytes(d.get("memory_bytes")))
        if d.get("bdf"):
            parts.append(f"bdf {d['bdf']}")
        if d.get("cpu_affinity"):
            parts.append(f"cpus {d['cpu_affinity']}")
        if d.get("numa_node") is not None and d["numa_node"] >= 0:
            parts.append(f"numa {d['numa_node']}")
        procs = d.get("processes") or []
        if procs:
            parts.append("pids " + ",".join(str(p["pid"]) for p in procs))
        lines.append(", ".join(parts))
    return lines


def ultraserver_text(u: dict[str, str]) -> str:
    """2.34's UltraServer fields in words ("UltraServer us-1, node 1 of 4"); the key names are
    composed (neuron_ls_json.py), so unknown ones are listed as printed."""
    known = {"id", "node_index", "node_count"}
    text = "UltraServer" + (f" {u['id']}" if u.get("id") else "")
    if u.get("node_index") is not None:
        text += f", node {u['node_index']}" + (f" of {u['node_count']}" if u.get("node_count") else "")
    rest = ", ".join(f"{k} {v}" for k, v in u.items() if k not in known)
    return text + (f" ({rest})" if rest else "")


def format_inventory_text(d: dict[str, Any]) -> str:
    """Plain text; every kind that is absent gets one line saying why."""
    lines: list[str] = []
    if d.get("neuron"):
        lines += _neuron_lines(d["neuron"])
    else:
        lines.append(f"Neuron: none ({d.get('neuron_reason') or 'unknown reason'})")
    if d.get("gpus"):
        driver = f", driver {d['gpu_driver']}" if d.get("gpu_driver") else ""
        lines.append(f"GPU: {len(d['gpus'])} device(s){driver}")
        for g in d["gpus"]:
            if g.get("error"):
                lines.append(f"  gpu {g['index']}: error: {g['error']}")
                continue
            power = f", {g['power_limit_w']:.0f} W limit" if g.get("power_limit_w") else ""
            lines.append(
                f"  gpu {g['index']}: {g.get('name') or '?'}, {human_bytes(g.get('memory_total'))}{power}"
            )
    else:
        lines.append(f"GPU: none ({d.get('gpu_reason') or 'unknown reason'})")
    cpu = d.get("cpu") or {}
    lines.append(
        f"CPU: {cpu.get('model') or 'unknown model'} ({cpu.get('arch') or '?'}), "
        f"{cpu.get('logical_cores') or '?'} logical / {cpu.get('physical_cores') or '?'} physical cores, "
        f"{human_bytes(cpu.get('memory_total'))} memory"
    )
    return "\n".join(lines) + "\n"
