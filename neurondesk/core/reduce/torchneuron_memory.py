"""TorchNeuron's device memory per process (issue 52 item 3): the allocator's statistics the probe
reads (core/events/neff_events.NeuronDeviceMemory), the latest reading and the peaks of each rank,
and the words of a device OOM ("device OOM at step 812: peak reserved 23.1 of 24.0 GiB on rank 5").
Pure: the MemoryReducer (core/reduce/memory.py) feeds it."""

from __future__ import annotations

from dataclasses import dataclass, field

from neurondesk.core.events.neff_events import NeuronDeviceMemory
from neurondesk.core.node.units import size_text

MAX_PROCESSES = 4096  # a garbage report must not grow the table without end


GIB = 1 << 30


def peak_of(peak: int, capacity: int | None) -> str:
    """"23.1 of 24.0 GiB", "3.0 MiB of 24.0 GiB", or the peak alone with why the capacity is missing."""
    if capacity is None:
        return f"{size_text(peak)} (the device's capacity not read: torch.accelerator.get_memory_info gave none)"
    if peak >= GIB and capacity >= GIB:
        return f"{peak / GIB:.1f} of {capacity / GIB:.1f} GiB"
    return f"{size_text(peak)} of {size_text(capacity)}"


@dataclass
class RankDeviceMemory:
    """One process's device memory: its latest reading, the highest peaks any reading gave."""

    pid: int
    rank: int | None
    device: int | None
    step: int
    allocated: int | None = None
    allocated_peak: int | None = None
    reserved: int | None = None
    reserved_peak: int | None = None
    active: int | None = None
    active_peak: int | None = None
    alloc_retries: int | None = None
    ooms: int | None = None
    capacity: int | None = None
    source: str = ""
    readings: int = 0

    def peak(self) -> tuple[str, int] | None:
        """The figure that runs out: reserved's peak (what the allocator holds from the runtime) where
        the source gives it, else allocated's."""
        if self.reserved_peak:
            return "reserved", self.reserved_peak
        if self.allocated_peak is not None:
            return "allocated", self.allocated_peak
        return None


def _most(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class DeviceMemory:
    by_pid: dict[int, RankDeviceMemory] = field(default_factory=dict)

    def add(self, e: NeuronDeviceMemory, rank: int | None) -> RankDeviceMemory | None:
        r = self.by_pid.get(e.pid)
        if r is None:
            if len(self.by_pid) >= MAX_PROCESSES:
                return None
            r = self.by_pid[e.pid] = RankDeviceMemory(pid=e.pid, rank=rank, device=e.device, step=e.step)
        r.rank = rank if rank is not None else r.rank
        r.step, r.device, r.source, r.readings = e.step, e.device, e.source, r.readings + 1
        r.allocated, r.reserved, r.active = e.allocated, e.reserved, e.active
        r.allocated_peak = _most(r.allocated_peak, _most(e.allocated_peak, e.allocated))
        r.reserved_peak = _most(r.reserved_peak, _most(e.reserved_peak, e.reserved))
        r.active_peak = _most(r.active_peak, _most(e.active_peak, e.active))
        r.alloc_retries, r.ooms = _most(r.alloc_retries, e.alloc_retries), _most(r.ooms, e.ooms)
        r.capacity = e.capacity if e.capacity is not None else r.capacity
        return r

    def ranks(self) -> list[RankDeviceMemory]:
        return sorted(self.by_pid.values(), key=lambda r: (r.rank is None, r.rank or 0, r.pid))

    def tightest(self) -> RankDeviceMemory | None:
        """The process whose peak came nearest its capacity (the highest peak where no capacity is known)."""
        rows = [r for r in self.by_pid.values() if r.peak() is not None]
        if not rows:
            return None
        return max(rows, key=lambda r: (r.capacity is not None, r.peak()[1] / r.capacity if r.capacity else r.peak()[1]))

    def oom_words(self, pid: int | None, step: int | None) -> str | None:
        """"device OOM at step 812: peak reserved 23.1 of 24.0 GiB on rank 5 (1 allocation failed, 3 retried)"
        for the failing process (else the one whose OOM count is not 0, else the tightest); None
        without a reading."""
        r = self.by_pid.get(pid) if pid is not None else None
        if r is None:
            r = next((x for x in self.ranks() if x.ooms), None) or self.tightest()
        if r is None or r.peak() is None:
            return None
        name, peak = r.peak()
        of = peak_of(peak, r.capacity)
        who = f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"
        counts = [f"{r.ooms:,} allocation{'s' if r.ooms != 1 else ''} failed" if r.ooms else None,
                  f"{r.alloc_retries:,} retried after pruning" if r.alloc_retries else None]
        said = "; ".join(c for c in counts if c)
        at = step if step is not None else r.step
        return f"device OOM at step {at}: peak {name} {of} on {who}" + (f" ({said})" if said else "")
