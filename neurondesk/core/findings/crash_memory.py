"""The memory at a run's end against its limit, for the account of its death (core/findings/crash.py): the host's
(the cgroup's peak against its limit, else the workload's RSS against the host's memory) and the
device's (the tightest NeuronCore's HBM peak, CUDA's own out-of-memory message, NVML's reading). Pure."""

from __future__ import annotations

import re

import msgspec

from neurondesk.core.events.device_events import ProcessTreeSample
from neurondesk.core.node.units import size_text
from neurondesk.core.reduce.state import RunState

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE = r"(\d+(?:\.\d+)?) ?([KMGT]iB|B)"
_CUDA_TOTAL = re.compile(rf"total capacity of {_SIZE}|{_SIZE} total capacity")
_CUDA_FREE = re.compile(rf"of which {_SIZE} is free|{_SIZE} free")
_CUDA_TRIED = re.compile(rf"Tried to allocate {_SIZE}")
_CUDA_GPU = re.compile(r"GPU (\d+)")
# TorchNeuron's device OOM: csrc/core/allocator/NeuronCachingAllocator.cpp NrtTensorPool::AllocateWithRetry
# raises std::runtime_error("NRT allocation failed for size N (OOM)") once the retry after pruning failed too
NRT_OOM = re.compile(r"NRT allocation failed for size (\d+) \(OOM\)")


class CrashMemory(msgspec.Struct, frozen=True, kw_only=True):
    """One memory at the end: how much was used (at its peak where known) of what limit."""

    what: str  # "cgroup /job-7", "host", "NeuronCore 0 HBM", "GPU 0"
    used_bytes: int | None = None
    limit_bytes: int | None = None
    words: str = ""


def _bytes(m: re.Match | None) -> int | None:
    if m is None:
        return None
    groups = [g for g in m.groups() if g is not None]
    return int(float(groups[0]) * _UNITS[groups[1]]) if len(groups) == 2 else None


_ROLES = (("main", "the main process"), ("rank", "ranks"), ("dataloader", "DataLoader workers"),
          ("compiler", "compilers"), ("helper", "helpers"), ("other", "others"))


def _held_by_role(tree: ProcessTreeSample) -> str | None:
    """Who held the workload's RSS in a process-tree sample: "ranks 4.4 GiB, 8 DataLoader workers 3.1 GiB"
    (None with one kind of process only: nothing to tell apart)."""
    sums: dict[str, tuple[int, int]] = {}
    for p in tree.processes:
        n, rss = sums.get(p.role, (0, 0))
        sums[p.role] = (n + 1, rss + p.rss)
    if len(sums) < 2:
        return None
    parts = []
    for role, label in _ROLES:
        if role in sums:
            n, rss = sums[role]
            name = label if role == "main" else f"{n} {label if n > 1 else label[:-1]}"
            parts.append(f"{name} {size_text(rss)}")
    return ", ".join(parts)


def host_memory(state: RunState, pid: int | None) -> CrashMemory | None:
    """The cgroup's peak against its limit (or the host's memory), with the RSS the last sample saw."""
    trees, host, cg = state.parts.telemetry.live_trees, state.host, state.parts.telemetry.cgroup
    tree = trees[-1] if trees else None
    proc = next((p for t in reversed(trees) for p in t.processes if p.pid == pid and p.rss), None)
    rss = proc.rss if proc is not None else (tree.total_rss if tree is not None and tree.total_rss else None)
    whose = "its" if proc is not None else "the workload's"
    rss_words = f"{whose} RSS was {size_text(rss)} at the last sample" if rss else None
    held = _held_by_role(tree) if tree is not None else None
    if rss_words and held:
        rss_words += f" ({held})"
    if cg is not None and cg.limit_bytes is not None:
        used = cg.peak_bytes if cg.peak_bytes is not None else cg.usage_bytes
        name = cg.limit_path or cg.path
        head = (f"host memory: cgroup {name} {'peaked at' if cg.peak_bytes is not None else 'used'} "
                f"{size_text(used)} of its {size_text(cg.limit_bytes)} limit" if used is not None
                else f"host memory: cgroup {name}'s limit {size_text(cg.limit_bytes)}")
        return CrashMemory(what=f"cgroup {name}", used_bytes=used, limit_bytes=cg.limit_bytes,
                           words="; ".join(x for x in (head, rss_words) if x))
    if host is not None and host.memory_total:
        notes = [f"{size_text(host.memory_available)} available"] if rss_words else []
        if cg is not None and cg.version:
            notes.append(f"its cgroup {cg.path} has no memory limit")
        head = (f"{rss_words}, of the host's {size_text(host.memory_total)}" if rss_words
                else f"{size_text(host.memory_used)} used of {size_text(host.memory_total)}")
        words = f"host memory: {head}" + (f" ({'; '.join(notes)})" if notes else "")
        return CrashMemory(what="host", used_bytes=rss or host.memory_used, limit_bytes=host.memory_total, words=words)
    if rss_words:
        return CrashMemory(what="process", used_bytes=rss, words=f"host memory: {rss_words}")
    return None


def device_memory(state: RunState, texts: list[str]) -> CrashMemory | None:
    """The device memory at the end: TorchNeuron's allocator statistics, the Neuron HBM peak, CUDA's
    message, or NVML's last reading."""
    tn = torchneuron_memory(state, texts)
    if tn is not None:
        return tn
    room = state.parts.telemetry.hbm_headroom()
    if room is not None:
        return CrashMemory(what=f"NeuronCore {room.core} HBM", used_bytes=room.peak_bytes, limit_bytes=room.capacity_bytes,
                           words=(f"device memory: NeuronCore {room.core} peaked at {size_text(room.peak_bytes)} of "
                                  f"{size_text(room.capacity_bytes)} (neuron-monitor)"))
    line = next((t for t in texts if "CUDA out of memory" in t or "OutOfMemoryError" in t), None)
    if line is not None:
        total, free = _bytes(_CUDA_TOTAL.search(line)), _bytes(_CUDA_FREE.search(line))
        tried, gpu = _bytes(_CUDA_TRIED.search(line)), _CUDA_GPU.search(line)
        name = f"GPU {gpu.group(1)}" if gpu else "GPU"
        words = f"device memory: {name}"
        if total is not None and free is not None:
            words += f" {size_text(total - free)} in use of {size_text(total)}"
        if tried is not None:
            words += f"; it tried to allocate {size_text(tried)} more"
        return CrashMemory(what=name, used_bytes=None if total is None or free is None else total - free,
                           limit_bytes=total, words=words)
    gpus = [g for g in (state.gpu.gpus if state.gpu is not None else []) if g.memory_total and g.memory_used is not None]
    if gpus:
        g = max(gpus, key=lambda g: g.memory_used / g.memory_total)
        return CrashMemory(what=f"GPU {g.index}", used_bytes=g.memory_used, limit_bytes=g.memory_total,
                           words=(f"device memory: GPU {g.index} {size_text(g.memory_used)} of "
                                  f"{size_text(g.memory_total)} at the last sample (NVML)"))
    return None


def torchneuron_memory(state: RunState, texts: list[str]) -> CrashMemory | None:
    """TorchNeuron's statistics of the failing rank (core/reduce/torchneuron_memory.py): with its OOM
    line, "device OOM at step 812: peak reserved 23.1 of 24.0 GiB on rank 5"; else its peak."""
    mem = state.parts.memory.torchneuron
    if mem is None or not mem.by_pid:
        return None
    first = state.parts.ranks.failed_first
    pid = first.pid if first is not None else None
    oom = next((m for t in texts if (m := NRT_OOM.search(t)) is not None), None)
    r = mem.by_pid.get(pid) if pid is not None else None
    r = r or next((x for x in mem.ranks() if x.ooms), None) or mem.tightest()
    if r is None or r.peak() is None:
        return None
    name, peak = r.peak()
    if oom is not None:
        words = mem.oom_words(r.pid, first.step if first is not None else None)
        words = f"device memory: {words}; it tried to allocate {size_text(int(oom.group(1)))} more"
    else:
        who = f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"
        of = f" of {size_text(r.capacity)}" if r.capacity else ""
        words = f"device memory: {who}'s {name} memory peaked at {size_text(peak)}{of} (TorchNeuron's allocator)"
    return CrashMemory(what=f"neuron device {r.device if r.device is not None else 0}", used_bytes=peak,
                       limit_bytes=r.capacity, words=words)
