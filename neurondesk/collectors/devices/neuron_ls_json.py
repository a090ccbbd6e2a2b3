"""neuron-ls JSON: ``--json-output`` (a list of devices, every key generation) and Neuron 2.34's
``--output-format json`` (an object with instance and UltraServer fields at the top and the devices
under a key of their own), and the value parsers the table reader shares.

The 2.34 shape is composed: the announcement (Neuron docs, "Announcing end of support for the
neuron-ls JSON output format starting with Neuron 2.34", 2026-10-16) says only that it adds
top-level fields for the instance and the UltraServer; its key names were not published in what
we read, so the top level is read tolerantly (``DEVICE_KEYS``, ``INSTANCE_KEYS``,
``ULTRASERVER_KEYS``, else the first list of device-like objects).
"""

from __future__ import annotations

import json
import re
from typing import Any

from neurondesk.core.events.device_events import NeuronDevice, NeuronInventory, NeuronProcess


class NeuronLsError(ValueError):
    """Output that is neither neuron-ls JSON nor a neuron-ls table."""


# ---------------------------------------------------------------- small value parsers


MAX_CORES = 4096  # NeuronCores one device or one listing can plausibly have; larger counts are garbage
_MAX_INT = 1 << 62


def as_int(v: Any) -> int | None:
    """int from an int or a numeric string ("-1", " 2 "); None for anything else, a non-finite
    float or a number too large to be a device fact."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -_MAX_INT < v < _MAX_INT else None
    if isinstance(v, float) and v.is_integer() and abs(v) < _MAX_INT:
        return int(v)
    if isinstance(v, str) and len(v) <= 40:
        try:
            return as_int(int(v.strip()))
        except ValueError:
            return None
    return None


def parse_id_list(text: str) -> list[int]:
    """Id lists as neuron-ls prints them ("0-1", "12, 3, 4, 1", "0-31,64-95") -> ints."""
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        lo, sep, hi = part.partition("-")
        if lo.isdigit() and sep and hi.isdigit() and len(lo) <= 7 and len(hi) <= 7:
            first, last = int(lo), int(hi)
            if 0 <= last - first < MAX_CORES and len(out) + last - first < MAX_CORES:
                out.extend(range(first, last + 1))
        elif part.isdigit() and len(part) <= 7:
            out.append(int(part))
    return out


_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_memory(text: str) -> int | None:
    # neuron-ls's "32 GB" is 32 GiB (memory_size 34359738368 in the JSON).
    m = re.fullmatch(r"\s*(\d{1,12}(?:\.\d{1,6})?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _runtime_version(v: Any) -> str | None:
    s = str(v).strip() if v is not None else ""
    return None if s in ("", "NA") else s


# ---------------------------------------------------------------- JSON


def _device_from_json(item: dict[str, Any], position: int) -> NeuronDevice:
    index = as_int(item.get("neuron_device"))
    index = position if index is None else index
    raw_ids = item.get("neuroncore_ids")
    ids = [i for i in (as_int(x) for x in raw_ids) if i is not None] if isinstance(raw_ids, list) else None
    nc = as_int(item.get("nc_count"))
    if nc is not None and not 0 <= nc <= MAX_CORES:
        nc = None  # garbage: never a list of a billion core ids
    if nc is None:
        nc = len(ids) if ids is not None else 0
    if ids is None:  # before tools 2.25: global ids follow device order (as backend.ai assumes)
        ids = list(range(index * nc, (index + 1) * nc))
    connected = item.get("connected_to")
    procs = item.get("neuron_processes")
    return NeuronDevice(
        index=index,
        nc_count=nc,
        core_ids=ids,
        memory_bytes=as_int(item.get("memory_size")),
        bdf=str(item["bdf"]) if item.get("bdf") is not None else None,
        cpu_affinity=str(item["cpu_affinity"]) if item.get("cpu_affinity") is not None else None,
        numa_node=as_int(item.get("numa_node")),
        connected_to=[i for i in (as_int(x) for x in connected) if i is not None]
        if isinstance(connected, list)
        else [],
        processes=[
            NeuronProcess(
                pid=as_int(p.get("pid")),
                command=str(p.get("command") or ""),
                runtime_version=_runtime_version(p.get("neuron_runtime_version")),
            )
            for p in (procs if isinstance(procs, list) else [])
            if isinstance(p, dict)
        ],
        logical_nc_config=as_int(item.get("logical_neuroncore_config")),
    )


def parse_json(text: str) -> NeuronInventory:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, or an integer of thousands of digits
        raise NeuronLsError(f"not neuron-ls JSON ({e})") from None
    return _inventory_from_json(data)


def _inventory_from_json(data: Any) -> NeuronInventory:
    """A list of devices (``--json-output``), or an object holding one (2.34's ``--output-format
    json``: instance and UltraServer fields at the top, the devices under a key of their own)."""
    top: dict[str, Any] = {}
    if isinstance(data, dict):
        top, data = data, _device_list(data)
    if not isinstance(data, list):
        raise NeuronLsError("neuron-ls JSON is neither a list of devices nor an object holding one")
    devices: list[NeuronDevice] = []
    warnings: list[str] = []
    for pos, item in enumerate(data):
        if isinstance(item, dict):
            devices.append(_device_from_json(item, pos))
        else:
            warnings.append(f"entry {pos} skipped: not an object")
    first = next((d for d in data if isinstance(d, dict)), {})
    lnc = [d.logical_nc_config for d in devices if d.logical_nc_config is not None]
    instance = _instance_fields(top)
    return NeuronInventory(
        devices=devices,
        source="output-format-json" if top else "json",
        instance_type=instance.get("type") or _text(first.get("instance_type")),
        instance_id=instance.get("id") or _text(first.get("instance_id")),
        logical_nc_config=as_int(top.get("logical_neuroncore_config")) or (lnc[0] if lnc else None),
        warnings=warnings,
        ultraserver=_scalars(_first_value(top, ULTRASERVER_KEYS)),
    )


DEVICE_KEYS = ("neuron_devices", "devices", "neuron_device_info")  # the first one present holds them
INSTANCE_KEYS = ("instance", "instance_info", "ec2_instance")
ULTRASERVER_KEYS = ("ultraserver", "ultra_server", "ultraserver_info")
_DEVICE_FIELDS = ("neuron_device", "nc_count", "neuroncore_ids", "memory_size", "bdf")


def _looks_like_devices(v: Any) -> bool:
    return isinstance(v, list) and (not v or any(isinstance(d, dict) and any(k in d for k in _DEVICE_FIELDS)
                                                 for d in v))


def _device_list(top: dict[str, Any]) -> Any:
    """The devices wherever they sit: a known key, else the first list of device-like objects,
    one level down too (``{"neuron": {"devices": [...]}}``)."""
    for key in DEVICE_KEYS:
        if _looks_like_devices(top.get(key)):
            return top[key]
    for v in top.values():
        if _looks_like_devices(v) and v:
            return v
    for v in top.values():
        if isinstance(v, dict):
            for w in v.values():
                if _looks_like_devices(w) and w:
                    return w
    return None


def _text(v: Any) -> str | None:
    return v.strip() or None if isinstance(v, str) else None


def _first_value(top: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((top[k] for k in keys if k in top), None)


def _instance_fields(top: dict[str, Any]) -> dict[str, str]:
    """Instance type and id: top-level keys (``instance_type``), or an object of their own
    (``"instance": {"type": ..., "id": ...}`` or with the long key names inside)."""
    inner = _first_value(top, INSTANCE_KEYS)
    inner = inner if isinstance(inner, dict) else {}
    found: dict[str, str] = {}
    for name in ("type", "id"):
        v = _text(top.get(f"instance_{name}")) or _text(inner.get(name)) or _text(inner.get(f"instance_{name}"))
        if v:
            found[name] = v
    return found


def _scalars(v: Any) -> dict[str, str]:
    """An object's scalar fields as text (the UltraServer's id, node index, size ...)."""
    if not isinstance(v, dict):
        return {}
    return {str(k)[:64]: str(x)[:200] for k, x in list(v.items())[:32]
            if isinstance(x, str | int | float | bool) and x is not None}


MAX_JSON_STARTS = 32  # lines starting with "[" or "{" tried as the start of the JSON in a paste
_DECODER = json.JSONDecoder()


def parse_embedded_json(text: str) -> NeuronInventory:
    """neuron-ls JSON inside a paste: the first line starting with "[" or "{" that starts a JSON
    list of devices (a shell prompt "[user@host ~]$" or "[1]+ Done" does not); text after it is
    ignored. Raises NeuronLsError when no such line does."""
    why = "no line starts with '[' or '{'"
    empty: NeuronInventory | None = None
    for start in _json_starts(text)[:MAX_JSON_STARTS]:
        try:
            inv = _inventory_from_json(_DECODER.raw_decode(text, start)[0])
        except (ValueError, RecursionError) as e:  # NeuronLsError is a ValueError
            why = str(e) if isinstance(e, NeuronLsError) else f"not neuron-ls JSON ({e})"
            continue
        if inv.devices:
            return inv
        empty = empty or inv
    if empty is not None:
        return empty
    raise NeuronLsError(why)


def _json_starts(text: str) -> list[int]:
    starts, pos = [], 0
    for line in text.splitlines(keepends=True):
        body = line.lstrip()
        if body.startswith(("[", "{")):
            starts.append(pos + len(line) - len(body))
        pos += len(line)
    return starts
