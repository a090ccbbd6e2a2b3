"""``torch_neuronx.memory``: the device memory statistics, as torch-neuronx's source has them
(parmoham-aws/test-repo-parmoham, commit 67d8dc4a): ``torch_neuronx/memory.py`` ``memory_stats(device)``
returns ``_C._get_memory_stats(index)``: ``allocated_bytes``, ``reserved_bytes``, ``active_bytes`` (each a
dict of ``current``, ``peak``, ``allocated``, ``freed``), ``num_alloc_retries``, ``num_ooms``,
``num_tensor_frees``, ``allocation_requests``. A failed allocation is
``csrc/core/allocator/NeuronCachingAllocator.cpp`` ``NrtTensorPool::AllocateWithRetry``: the runtime
says NRT_RESOURCE, the pool is pruned and the allocation tried once more (a success counts
``num_alloc_retries``); a second failure counts ``num_ooms`` and raises ``RuntimeError("NRT allocation
failed for size N (OOM)")``. From Neuron 2.34 ``torch.accelerator``'s memory functions work on the
device ("torch.neuron and torch.accelerator reference", torch/reference/api/torch-neuron-module,
2026-11-18): the double installs ``torch.accelerator.memory_stats`` (CUDA-style flat keys) and
``get_memory_info`` (free, total) over the same figures, since a Python backend has no C++ allocator.

The double's device: ``TORCHNEURON_DOUBLE_HBM_BYTES`` bytes (default 24 GiB, one trn2 logical
NeuronCore's HBM share); its tensors count their CPU storage's bytes while alive (one count per
storage, views share it). Reserved is what the caching allocator holds: here allocated rounded up
to 2 MiB segments ("Guidelines for memory management", torch/reference/guidelines-memory-management,
2026-10-08: reserved >= allocated >= active)."""

from __future__ import annotations

import os
import threading
import weakref

import torch

CAPACITY = int(os.environ.get("TORCHNEURON_DOUBLE_HBM_BYTES") or 24 << 30)
SEGMENT = 2 << 20
_lock = threading.Lock()
_live: dict[int, list[int]] = {}  # storage address -> [bytes, wrappers alive]
_stats = {"allocated": [0, 0, 0, 0], "reserved": [0, 0, 0, 0]}  # current, peak, allocated, freed
_counts = {"num_alloc_retries": 0, "num_ooms": 0, "num_tensor_frees": 0, "allocation_requests": 0}


def _move(name: str, delta: int) -> None:
    row = _stats[name]
    row[0] += delta
    row[1] = max(row[1], row[0])
    row[2 if delta > 0 else 3] += abs(delta)


def _reserved_for(allocated: int) -> int:
    return -(-allocated // SEGMENT) * SEGMENT


def track(elem: torch.Tensor) -> None:
    """A ``neuron`` tensor now holds ``elem``'s storage: counted once per storage while any holds it (the
    wrapper itself takes no weak reference: ``module.to`` swaps wrappers, which a weak reference forbids)."""
    from torch._subclasses.fake_tensor import is_fake

    if is_fake(elem) or elem.device.type != "cpu":  # torch.compile tracing: no device memory
        return
    try:
        storage = elem.untyped_storage()
        address, size = storage.data_ptr(), storage.nbytes()
    except Exception:  # noqa: BLE001 - a fake or meta tensor (tracing): no device memory
        return
    if not size:
        return
    with _lock:
        _counts["allocation_requests"] += 1
        row = _live.get(address)
        if row is not None:
            row[1] += 1
        else:
            if _stats["allocated"][0] + size > CAPACITY:
                _counts["num_ooms"] += 1
                raise RuntimeError(f"NRT allocation failed for size {size} (OOM)")
            _live[address] = [size, 1]
            _move("allocated", size)
            _move("reserved", _reserved_for(_stats["allocated"][0]) - _stats["reserved"][0])
    weakref.finalize(elem, _release, address).atexit = False  # the process's end frees nothing it still holds


def _release(address: int) -> None:
    with _lock:
        row = _live.get(address)
        if row is None:
            return
        row[1] -= 1
        if row[1] == 0:
            del _live[address]
            _counts["num_tensor_frees"] += 1
            _move("allocated", -row[0])  # reserved stays: the segment is kept for reuse


def memory_stats(device=None) -> dict:
    with _lock:
        out = {f"{name}_bytes": dict(zip(("current", "peak", "allocated", "freed"), row, strict=True))
               for name, row in _stats.items()}
        out["active_bytes"] = dict(out["allocated_bytes"])
        return {**out, **_counts}


def memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes"]["current"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes"]["peak"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes"]["current"]


def max_memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes"]["peak"]


def _accelerator_stats(device_index=None, /) -> dict:
    """torch.accelerator.memory_stats's flat keys over the same figures."""
    s = memory_stats(device_index)
    out = {f"{name}.all.{k}": v for name in ("allocated_bytes", "reserved_bytes", "active_bytes")
           for k, v in s[name].items()}
    out.update(num_alloc_retries=s["num_alloc_retries"], num_ooms=s["num_ooms"])
    return out


def _accelerator_info(device_index=None, /) -> tuple[int, int]:
    return CAPACITY - memory_stats(device_index)["reserved_bytes"]["current"], CAPACITY


def install_accelerator() -> None:
    torch.accelerator.memory_stats = _accelerator_stats
    torch.accelerator.get_memory_info = _accelerator_info
