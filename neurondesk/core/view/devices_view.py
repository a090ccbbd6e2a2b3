"""The devices as the views show them: per-unit utilisation and memory (NeuronCores or GPUs when they are
sampled, else the host CPU per core), the Neuron memory by category against each core's HBM share, the
host's memory, the compile cache, the disks, and the collectors' trouble."""

from __future__ import annotations

from dataclasses import dataclass, field

from neurondesk.core.events import device_events as dev
from neurondesk.core.node.compile_wall import CompileWallMemory
from neurondesk.core.node.units import size_text as fmt_bytes
from neurondesk.core.reduce.neuron_memory import DEVICE_CATEGORIES, HbmHeadroom
from neurondesk.core.reduce.state import RunState
from neurondesk.core.reduce.torchneuron_memory import peak_of

NOTICES_SHOWN = 2  # the latest collector warnings under the bars


@dataclass(frozen=True)
class Unit:
    """One bar in the Devices panel."""

    label: str
    util: float | None  # 0..1
    mem_used: int | None
    mem_total: int | None


@dataclass(frozen=True)
class CoreMemory:
    """One NeuronCore's memory by category: each category's share of the bar (its HBM share when
    known and not exceeded, else what it uses), in the categories' order, the empty ones left out."""

    core: int | str
    shares: tuple[tuple[str, float], ...]
    used: int
    capacity: int | None


@dataclass(frozen=True)
class NeuronMemory:
    cores: tuple[CoreMemory, ...]  # the cores that report memory, the fullest first
    peaks: tuple[tuple[str, int], ...]  # the run's peak per category, per core
    headroom: HbmHeadroom | None


@dataclass(frozen=True)
class HostMemory:
    used: int
    total: int
    used_fraction: float | None
    cpu_percent: float | None
    swap_used: int


@dataclass(frozen=True)
class CompileCache:
    path: str
    remote: bool
    size_bytes: int | None
    entries: tuple[tuple[str, int], ...]  # the kinds with any
    disk_free_fraction: float | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class DiskLine:
    words: str
    warning: bool


@dataclass(frozen=True)
class DevicesView:
    key: tuple = field(repr=False)  # the samples it is built from: the same samples, the same section
    kind: str  # "neuron" | "gpu" | "host" | "none"
    units: tuple[Unit, ...]
    note: str
    memory_used: int | None  # over the units that report it
    memory_total: int | None
    hardware: str | None  # neuron_hardware_info's counts, when neuron-ls listed no devices
    unsampled_why: str | None  # why neither Neuron nor GPU telemetry: the inventory's reasons
    neuron_memory: NeuronMemory | None
    profile: dev.NeuronProfileCapture | None
    execution_errors: str | None
    host: HostMemory | None
    memory_creep: str | None  # its short words (core/findings/memory_creep.py)
    compilers: int  # compiler processes running now
    cache: CompileCache | None
    disks: tuple[DiskLine, ...]
    output_not_stored: str | None
    collector_notices: tuple[str, ...]  # "neuron-monitor: restarting ..."
    reduce_errors: str | None
    torchneuron_memory: tuple[str, ...] = ()  # TorchNeuron's allocator per rank, the fullest first (words)
    compile_wall: CompileWallMemory | None = None  # compilers emptying host memory soon (core/node/compile_wall.py)


def device_units(state: RunState) -> tuple[str, list[Unit], str]:
    """(kind, units, note): per-NeuronCore, per-GPU, or per host CPU when neither is sampled."""
    if state.neuron is not None and state.neuron.cores:
        units = []
        for c in state.neuron.cores:
            used = sum(c.memory.values()) if c.memory else None
            util = c.utilization
            capacity = state.parts.telemetry.core_capacity(c.core)  # not c.memory_total: that is the memory in use
            units.append(Unit(f"nc{c.core}", None if util is None else util / 100, used, capacity))
        return "neuron", units, f"{len(units)} NeuronCores (neuron-monitor)"
    if state.neuron is not None and not (state.gpu is not None and state.gpu.gpus):
        # neuron-monitor is running but this run holds no NeuronCore right now (between runtimes,
        # or after the workload's runtime exited): say so rather than fall back to the host
        return "neuron", [], "neuron-monitor: no NeuronCore in use by this run in the latest sample"
    if state.gpu is not None and state.gpu.gpus:
        units = [Unit(f"gpu{g.index}", None if g.util_gpu is None else g.util_gpu / 100, g.memory_used,
                      g.memory_total) for g in state.gpu.gpus]
        return "gpu", units, f"{len(units)} GPUs (NVML)"
    if state.host is not None:
        units = [Unit(f"cpu{i}", p / 100, None, None) for i, p in enumerate(state.host.per_cpu_percent)]
        return "host", units, "host CPU per core (psutil): no Neuron or GPU telemetry in this run"
    return "none", [], "no device or host samples yet"


def memory_sum(units: list[Unit]) -> tuple[int | None, int | None]:
    """Used and total memory over the units that report them."""
    used = [u.mem_used for u in units if u.mem_used is not None]
    total = [u.mem_total for u in units if u.mem_total is not None]
    return (sum(used) if used else None), (sum(total) if total else None)


def execution_text(state: RunState) -> str | None:
    """neuron-monitor's failed executions: per second in the latest report, and in all; None when
    there were none."""
    tel = state.parts.telemetry
    total = sum(tel.execution_errors_by_status.values())
    rate = state.neuron.execution_errors_per_s if state.neuron is not None else None
    if not total and not rate:
        return None
    by_class = sorted(tel.execution_errors_by_class.items(), key=lambda kv: (-kv[1], kv[0]))
    classes = f" ({', '.join(f'{k} {v}' for k, v in by_class)})" if by_class else ""
    return f"execution errors {rate or 0.0:.1f}/s now, {total} in all{classes}"


def hardware_text(state: RunState) -> str | None:
    """Device and core counts from neuron_hardware_info, when neuron-ls listed no devices."""
    hw = state.parts.telemetry.neuron_hardware
    inv = state.inventory
    if hw is None or hw.device_count is None or (inv is not None and inv.neuron is not None):
        return None
    each = f", {hw.device_memory_bytes / 2**30:,.1f} GiB each" if hw.device_memory_bytes else ""
    devices = f"{hw.device_count} Neuron device{'s' if hw.device_count != 1 else ''}"
    return f"{devices} × {hw.cores_per_device or '?'} cores{each} (neuron_hardware_info)"


def _category_order(name: str) -> tuple[int, str]:
    return (DEVICE_CATEGORIES.index(name) if name in DEVICE_CATEGORIES else 99, name)


def core_memory(c: dev.NeuronCoreSample, capacity: int | None) -> CoreMemory:
    used = c.memory_total or sum(c.memory.values())
    scale = capacity if capacity and capacity >= used else used
    shares = tuple((k, c.memory[k] / scale) for k in sorted(c.memory, key=_category_order) if c.memory[k] > 0)
    return CoreMemory(c.core, shares, used, capacity)


def neuron_memory(state: RunState) -> NeuronMemory | None:
    """The cores of the latest Neuron sample that report memory; None without one."""
    sample, tel = state.neuron, state.parts.telemetry
    cores = [c for c in (sample.cores if sample is not None else []) if c.memory and (c.memory_total or 0) > 0]
    if not cores:
        return None
    cores.sort(key=lambda c: -(c.memory_total or 0))
    return NeuronMemory(tuple(core_memory(c, tel.core_capacity(c.core)) for c in cores),
                        tuple(tel.neuron_memory.category_peaks().items()), tel.hbm_headroom())


def _host(h: dev.HostSample | None) -> HostMemory | None:
    if h is None:
        return None
    return HostMemory(h.memory_used, h.memory_total, h.memory_used / h.memory_total if h.memory_total else None,
                      h.cpu_percent, h.swap_used)


def _cache(c: dev.CacheScan | None) -> CompileCache | None:
    """The Neuron compile cache, once it exists (or is remote)."""
    if c is None or not (c.exists or c.remote):
        return None
    free = c.free_bytes / c.disk_total_bytes if c.free_bytes is not None and c.disk_total_bytes else None
    return CompileCache(c.path, c.remote, c.size_bytes, tuple((k, v) for k, v in c.entries.items() if v), free,
                        tuple(c.warnings))


def _unsampled_why(kind: str, inv: dev.DeviceInventory | None) -> str | None:
    if kind != "host" or inv is None or not (inv.neuron_reason or inv.gpu_reason):
        return None
    return "; ".join(r for r in (inv.neuron_reason, inv.gpu_reason) if r)


def _key(state: RunState, creep: str | None) -> tuple:
    tel, notices = state.parts.telemetry, state.notices
    return (state.neuron, state.gpu, state.host, state.process_tree, state.cache, state.inventory,
            tel.neuron_profile, tel.neuron_hardware, len(notices), notices[-1] if notices else None,
            state.reduce_errors, state.parts.disk.events, creep, _tn_readings(state))


def _tn_readings(state: RunState) -> int:
    mem = state.parts.memory.torchneuron
    return 0 if mem is None else sum(r.readings for r in mem.by_pid.values())


TN_RANKS_SHOWN = 8


def torchneuron_lines(state: RunState) -> tuple[str, ...]:
    """One line a rank, the nearest its capacity (else the highest peak) first, at most TN_RANKS_SHOWN:
    "rank 5 neuron:0 allocated 21.0 GiB (peak 22.9 GiB), reserved 23.1 GiB (peak 23.1 of 24.0 GiB); 1 OOM"."""
    mem = state.parts.memory.torchneuron
    if mem is None or not mem.by_pid:
        return ()
    rows = sorted(mem.by_pid.values(), key=lambda r: -(r.peak()[1] / r.capacity if r.capacity and r.peak()
                                                       else (r.peak() or ("", 0))[1]))
    out = []
    for r in rows[:TN_RANKS_SHOWN]:
        who = f"rank {r.rank}" if r.rank is not None else f"pid {r.pid}"
        parts = []
        for name, now, peak in (("allocated", r.allocated, r.allocated_peak), ("reserved", r.reserved, r.reserved_peak)):
            if now is None and peak is None:
                continue
            cap = r.capacity if name == (r.peak() or ("",))[0] else None
            shown = "?" if now is None else fmt_bytes(now)
            parts.append(f"{name} {shown} (peak {'?' if peak is None else peak_of(peak, cap) if cap else fmt_bytes(peak)})")
        counts = [f"{r.ooms:,} OOM{'s' if r.ooms != 1 else ''}" if r.ooms else "",
                  f"{r.alloc_retries:,} retried" if r.alloc_retries else ""]
        tail = "; ".join(c for c in counts if c)
        out.append(f"{who} neuron:{r.device if r.device is not None else '?'} " + ", ".join(parts)
                   + (f"; {tail}" if tail else ""))
    if len(rows) > TN_RANKS_SHOWN:
        out.append(f"… {len(rows) - TN_RANKS_SHOWN} more ranks")
    return tuple(out)


def devices_view(state: RunState, creep: str | None, previous: DevicesView | None = None) -> DevicesView:
    """The section; ``previous`` (the last frame's) is kept whole while nothing new was sampled.
    ``creep``: the memory creep's short words, from the frame's RunFigures."""
    key = _key(state, creep)
    if previous is not None and previous.key == key:
        return previous
    kind, units, note = device_units(state)
    used, total = memory_sum(units)
    tree, disk = state.process_tree, state.parts.disk
    # the compile wall's notice is shown live below (compile_wall), not again as a notice
    trouble = [n for n in state.notices if n.level in ("warn", "error")
               and n.source not in ("probe", "compile-wall")][-NOTICES_SHOWN:]
    return DevicesView(
        key=key, kind=kind, units=tuple(units), note=note, memory_used=used, memory_total=total,
        hardware=hardware_text(state) if kind == "neuron" else None, unsampled_why=_unsampled_why(kind, state.inventory),
        neuron_memory=neuron_memory(state) if kind == "neuron" else None,
        profile=state.parts.telemetry.neuron_profile, execution_errors=execution_text(state), host=_host(state.host),
        memory_creep=creep, compilers=len(tree.compilers) if tree is not None else 0, cache=_cache(state.cache),
        disks=tuple(DiskLine(f.words(), bool(f.warning())) for f in disk.filesystems()),
        output_not_stored=disk.output_not_stored_words(), torchneuron_memory=torchneuron_lines(state),
        collector_notices=tuple(f"{n.source}: {n.message}" for n in trouble), reduce_errors=state.reduce_error_text,
        compile_wall=state.parts.compile_wall.figure())
