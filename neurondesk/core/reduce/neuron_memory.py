"""Neuron device memory by category over the run: neuron-monitor's ``memory_used`` gives, per
NeuronCore, ``constants``, ``model_code``, ``model_shared_scratchpad``, ``runtime_memory`` and
``tensors`` (and, per runtime on the host, ``constants``, ``dma_buffers``, ``tensors``); kept here
are each core's peak per category, the peak of each core's total, the host's peaks, and from them
the HBM headroom of the tightest core (its capacity from neuron-ls or neuron_hardware_info)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from neurondesk.core.events import device_events as dev

DEVICE_CATEGORIES = ("tensors", "constants", "model_code", "model_shared_scratchpad", "runtime_memory")
HOST_CATEGORIES = ("tensors", "constants", "dma_buffers")
MAX_CORES = 4096  # a garbage report must not grow the table without end
MAX_CATEGORIES = 32


def ordered(peaks: dict[str, int], known: tuple[str, ...]) -> dict[str, int]:
    """The documented categories first, in their order, then any other the tool printed."""
    return {**{k: peaks[k] for k in known if k in peaks}, **{k: v for k, v in sorted(peaks.items()) if k not in known}}


@dataclass(frozen=True)
class HbmHeadroom:
    """The core whose peak came nearest its capacity: what was left of its HBM share at that peak."""

    core: int | str
    peak_bytes: int
    capacity_bytes: int

    @property
    def free_bytes(self) -> int:
        return self.capacity_bytes - self.peak_bytes

    @property
    def free_fraction(self) -> float:
        return self.free_bytes / self.capacity_bytes


@dataclass
class NeuronMemoryPeaks:
    by_core: dict[int | str, dict[str, int]] = field(default_factory=dict)  # core -> category -> peak bytes
    total_by_core: dict[int | str, int] = field(default_factory=dict)  # core -> peak of its sum
    host: dict[str, int] = field(default_factory=dict)  # category -> peak bytes, runtimes summed per report
    samples: int = 0

    def add(self, e: dev.NeuronSample) -> None:
        seen = False
        for c in e.cores:
            if not c.memory or (c.core not in self.by_core and len(self.by_core) >= MAX_CORES):
                continue
            seen = True
            peaks = self.by_core.setdefault(c.core, {})
            for k, v in c.memory.items():
                if isinstance(v, int) and v >= 0 and (k in peaks or len(peaks) < MAX_CATEGORIES):
                    peaks[k] = max(peaks.get(k, 0), v)
            total = c.memory_total if c.memory_total is not None else sum(c.memory.values())
            self.total_by_core[c.core] = max(self.total_by_core.get(c.core, 0), total)
        host: dict[str, int] = {}
        for r in e.runtimes:
            for k in HOST_CATEGORIES:
                if isinstance(r.host_breakdown.get(k), int):
                    host[k] = host.get(k, 0) + r.host_breakdown[k]
        for k, v in host.items():
            self.host[k] = max(self.host.get(k, 0), v)
        self.samples += 1 if seen or host else 0

    def category_peaks(self) -> dict[str, int]:
        """Per category, the highest any one core held (a core's HBM share is what runs out)."""
        out: dict[str, int] = {}
        for peaks in self.by_core.values():
            for k, v in peaks.items():
                out[k] = max(out.get(k, 0), v)
        return ordered(out, DEVICE_CATEGORIES)

    def host_peaks(self) -> dict[str, int]:
        return ordered(self.host, HOST_CATEGORIES)

    def headroom(self, capacity: Callable[[int | str], int | None]) -> HbmHeadroom | None:
        """The tightest core (least left at its peak), among the cores whose capacity is known."""
        rooms = [HbmHeadroom(core, peak, cap) for core, peak in self.total_by_core.items()
                 if (cap := capacity(core))]
        return min(rooms, key=lambda h: (h.free_fraction, str(h.core))) if rooms else None
