"""TorchNeuron's device memory, the probe's reader (issue 52 item 3; backends/torchneuron.py holds the
rest of the adapter): ``torch_neuronx.memory.memory_stats()`` (torch_neuronx/memory.py, a call into
``_C._get_memory_stats``), else ``torch.accelerator.memory_stats()`` (Neuron 2.34+), and the device's
capacity from ``torch.accelerator.get_memory_info()``; cited in docs/torchneuron.md."""

from __future__ import annotations

import sys
import time

MEMORY_EVERY_NS = 10_000_000_000  # device memory read at most once in 10 s at a step end, and at exit
# (TorchNeuron's docs say memory_stats() synchronises the device; its source reads the caching allocator's
# counters (NeuronCachingAllocator.cpp): unverified on hardware, so rarely: a sync in 10 s at worst)
# torch_neuronx/memory.py memory_stats: {name: {current, peak, allocated, freed}} for these three,
# num_alloc_retries, num_ooms (csrc NeuronCachingAllocator.cpp AllocateWithRetry counts both);
# torch.accelerator.memory_stats has them as flat keys "allocated_bytes.all.current" ...
MEMORY_BYTES = (("allocated", "allocated_bytes"), ("reserved", "reserved_bytes"), ("active", "active_bytes"))

def _count(value) -> int | None:
    """A non-negative int, or None (never 0 for what the source did not give)."""
    return value if type(value) is int and value >= 0 else None  # noqa: E721


class DeviceMemoryReader:
    """TorchNeuron's device memory statistics (issue 52 item 3), read at a step end at most once in
    10 s (``next_ns``) and at exit; fail-open."""

    def __init__(self, probe, hooks) -> None:
        self.probe, self.hooks = probe, hooks
        self.next_ns = 0  # when the device memory may next be read (monotonic)
        self.off = False  # a read raised: said once, not read again

    def read(self, at: str, now: int | None = None) -> None:
        """One ``neuron_device_memory`` message: TorchNeuron's allocator statistics of the current
        device, fail-open (an exception turns the reading off, said once; it never reaches the script)."""
        self.next_ns = (now or time.monotonic_ns()) + MEMORY_EVERY_NS
        if self.off or self.hooks.module is None:
            return
        try:
            message = self.memory_message(at)
        except Exception as exc:  # noqa: BLE001 - fail open: said once, the training goes on
            self.off = True
            self.probe.send({"kind": "notice", "level": "warn", "source": "torchneuron", "message": (
                f"TorchNeuron's device memory statistics cannot be read ({type(exc).__name__}: {str(exc)[:200]}): "
                "device memory is not shown for this process")})
            return
        if message is not None:
            self.probe.send(message)

    def memory_message(self, at: str) -> dict | None:
        stats, source = None, ""
        memory = getattr(self.hooks.module, "memory", None)
        if callable(getattr(memory, "memory_stats", None)):
            stats, source = memory.memory_stats(), "torch_neuronx.memory"
        accel = getattr(sys.modules.get("torch"), "accelerator", None)
        try:
            on_neuron = accel is not None and str(getattr(accel.current_accelerator(), "type", "")) == "neuron"
        except Exception:  # noqa: BLE001 - a torch without the accelerator API's answer: torch_neuronx's alone
            on_neuron = False
        if stats is None and on_neuron:
            flat = accel.memory_stats()
            stats, source = {theirs: {k: flat.get(f"{theirs}.all.{k}") for k in ("current", "peak")}
                             for _, theirs in MEMORY_BYTES}, "torch.accelerator"
            stats.update(num_alloc_retries=flat.get("num_alloc_retries"), num_ooms=flat.get("num_ooms"))
        if not isinstance(stats, dict):
            return None
        capacity = None
        if on_neuron:
            try:
                capacity = _count(accel.get_memory_info()[1])
            except Exception:  # noqa: BLE001 - not there before Neuron 2.34: the capacity is unknown
                capacity = None
        device = None
        try:
            device = int(self.hooks.module.current_device())
        except Exception:  # noqa: BLE001
            pass
        out = {"kind": "neuron_device_memory", "step": self.probe.clock.step, "device": device, "at": at,
               "source": source, "capacity": capacity,
               "alloc_retries": _count(stats.get("num_alloc_retries")), "ooms": _count(stats.get("num_ooms"))}
        for ours, theirs in MEMORY_BYTES:
            row = stats.get(theirs) if isinstance(stats.get(theirs), dict) else {}
            out[ours], out[f"{ours}_peak"] = _count(row.get("current")), _count(row.get("peak"))
        return out
