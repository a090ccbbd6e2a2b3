"""summary.json's ``neuron`` section (issue 27): device memory peaks per category and the HBM
headroom (core/reduce/neuron_memory.py), the runtime's allocation logs of a device out of memory
(core/reduce/neuron_faults.py), a Neuron Explorer capture (its folder and the command that opens
it), TorchNeuron's FX-passes / lowering / compile split per compile (core/reduce/compile/graph_stats.py) and
the node's health counters (core/node/node_health.py: EFA, NeuronLink, ECC, throttling).
None when the run saw none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from neurondesk.core.node.node_health import health_words

if TYPE_CHECKING:  # the structs are part of summary_types' contract; only the builder reads a state
    from neurondesk.core.reduce.compile.graph_stats import CompileSplit
    from neurondesk.core.reduce.state import RunState


class _S(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    pass


class HbmHeadroomSection(_S):
    core: str  # the tightest NeuronCore, as neuron-monitor keys it
    peak_bytes: int
    capacity_bytes: int
    free_bytes: int
    free_fraction: float


class NeuronProfileSection(_S):
    folder: str
    open_command: str  # "neuron-explorer view -d FOLDER"
    requested: bool = True  # run --neuron-profile (False: the user's own NEURON_RT_INSPECT_ENABLE=1)
    torch_profiler_at: str | None = None  # where the script also uses torch.profiler (they conflict)


class CompileSplitSection(_S):
    compile: int  # the compile's index (1-based, as in "compiles")
    rank: int | None = None
    graph_id: str | None = None
    graph_name: str | None = None
    fx_passes_s: float | None = None
    lower_s: float | None = None
    compile_s: float | None = None
    node_count: int | None = None
    has_collectives: bool | None = None


class NodeHealthSection(_S):
    """The node's EFA, NeuronLink, ECC and throttling counters (core/node/node_health.py), as last read."""

    totals: dict[str, float] = {}  # counter -> count since the device or daemon started
    last_minute: dict[str, float] = {}  # counter -> what it grew by over the run's last minute
    window_s: float = 0.0  # what last_minute covers (less than 60 for a short run)
    sources: list[str] = []
    words: str | None = None  # "trn-07: 412 EFA retransmits in the last minute"; None: healthy


class NeffCacheSection(_S):
    """TorchNeuron's eager NEFF compiles and its NEFF cache over the run (core/reduce/compile/neff.py)."""

    compiles: int = 0  # eager NEFFs compiled (summed over the groups in "compiles")
    compile_s: float | None = None  # their seconds (None: unknown, the NEFF cache log gives no times)
    counted_from: str | None = None  # "metrics", "log" (TorchNeuron's metrics off or unreadable), "metrics and log"
    disagreement: str | None = None  # the metrics and the log counted differently, in words
    groups: int = 0  # compile entries they make (per step and cause)
    graph_neffs: int = 0  # NEFFs of torch.compile graphs (counted with their dynamo compiles)
    memory_hits: int | None = None  # CompilationCache.InMemoryHits, summed over the processes
    memory_misses: int | None = None
    disk_hits: int | None = None  # CompilationCache.PersistentHits: NEFFs the persistent cache served
    disk_misses: int | None = None
    evictions: int | None = None  # CompilationCache.Evictions: NEFFs the in-memory cache dropped, summed
    log_file: str | None = None  # the TORCH_NEURONX_LOG_FILE read
    log_misses: int = 0  # its "[NEFF_CACHE] Cache MISS" lines
    log_hits: int = 0
    log_stores: int = 0
    log_relayed: int = 0  # its warnings and errors passed on to the workload's stderr


class DeviceMemorySection(_S):
    """TorchNeuron's allocator statistics of one rank (core/reduce/torchneuron_memory.py): the latest
    reading and the run's peaks, bytes; None where its source gave none (never 0 for unknown)."""

    rank: int | None = None
    pid: int = 0
    device: int | None = None
    step: int = 0  # the step of the latest reading
    allocated_bytes: int | None = None
    allocated_peak_bytes: int | None = None
    reserved_bytes: int | None = None
    reserved_peak_bytes: int | None = None
    active_bytes: int | None = None
    active_peak_bytes: int | None = None
    alloc_retries: int | None = None  # num_alloc_retries
    ooms: int | None = None  # num_ooms
    capacity_bytes: int | None = None  # torch.accelerator.get_memory_info's total, where it answered
    source: str = ""  # "torch_neuronx.memory" | "torch.accelerator"


class NeuronSection(_S):
    memory_peak_bytes: dict[str, int] = {}  # per category, the most any one NeuronCore held
    host_memory_peak_bytes: dict[str, int] = {}  # per host category, the runtimes summed
    hbm_headroom: HbmHeadroomSection | None = None
    memory_logs: list[str] = []  # /tmp/nrt_mem_log_device_*.csv the runtime wrote on an allocation failure
    profile: NeuronProfileSection | None = None
    compile_splits: list[CompileSplitSection] = []
    graph_stats_unjoined: int = 0  # graph_stats rows no dynamo compile took (each a compile of its own in "compiles")
    node_health: NodeHealthSection | None = None
    neff_cache: NeffCacheSection | None = None  # TorchNeuron (issue 44)
    device_memory: list[DeviceMemorySection] = []  # TorchNeuron's allocator, one row a rank (issue 52)


def split_section(index: int, s: CompileSplit) -> CompileSplitSection:
    """One TorchNeuron graph of compile ``index`` (neuron.compile_splits, a compile entry's "graphs")."""
    return CompileSplitSection(compile=index, rank=s.rank, graph_id=s.graph_id, graph_name=s.graph_name,
                               fx_passes_s=s.fx_passes_s, lower_s=s.lower_s, compile_s=s.compile_s,
                               node_count=s.node_count, has_collectives=s.has_collectives)


def neuron_section(state: RunState) -> NeuronSection | None:
    tel = state.parts.telemetry
    room = tel.hbm_headroom()
    profile = tel.neuron_profile
    splits = [split_section(index, s) for index, rows in sorted(tel.graph_stats.by_compile.items()) for s in rows]
    section = NeuronSection(
        memory_peak_bytes=tel.neuron_memory.category_peaks(),
        host_memory_peak_bytes=tel.neuron_memory.host_peaks(),
        hbm_headroom=None if room is None else HbmHeadroomSection(
            core=str(room.core), peak_bytes=room.peak_bytes, capacity_bytes=room.capacity_bytes,
            free_bytes=room.free_bytes, free_fraction=round(room.free_fraction, 4)),
        memory_logs=list(tel.faults.mem_logs),
        profile=None if profile is None else NeuronProfileSection(
            folder=profile.folder, open_command=profile.open_command, requested=profile.requested,
            torch_profiler_at=profile.torch_profiler_at),
        compile_splits=splits,
        graph_stats_unjoined=tel.graph_stats.unjoined_rows,
        node_health=_health(state),
        neff_cache=_neff(state),
        device_memory=_device_memory(state),
    )
    return None if section == NeuronSection() else section


def _device_memory(state: RunState) -> list[DeviceMemorySection]:
    mem = state.parts.memory.torchneuron
    if mem is None:
        return []
    return [DeviceMemorySection(
        rank=r.rank, pid=r.pid, device=r.device, step=r.step, allocated_bytes=r.allocated,
        allocated_peak_bytes=r.allocated_peak, reserved_bytes=r.reserved, reserved_peak_bytes=r.reserved_peak,
        active_bytes=r.active, active_peak_bytes=r.active_peak, alloc_retries=r.alloc_retries, ooms=r.ooms,
        capacity_bytes=r.capacity, source=r.source) for r in mem.ranks()]


def _neff(state: RunState) -> NeffCacheSection | None:
    c = state.parts.neff.cache()
    if c is None:
        return None
    return NeffCacheSection(compiles=c.compiles, compile_s=c.compile_s, counted_from=c.counted_from,
                            disagreement=c.disagreement, groups=c.groups, graph_neffs=c.graph_neffs,
                            memory_hits=c.memory_hits, memory_misses=c.memory_misses, disk_hits=c.disk_hits,
                            disk_misses=c.disk_misses, evictions=c.evictions, log_file=c.log.path, log_misses=c.log.misses,
                            log_hits=c.log.hits, log_stores=c.log.stores, log_relayed=c.log.relayed)


def _health(state: RunState) -> NodeHealthSection | None:
    h = state.parts.telemetry.health.health(state.parts.job.identity().node or "this node")
    if h is None:
        return None
    return NodeHealthSection(totals=h.totals, last_minute=h.recent, window_s=round(h.window_s, 3),
                             sources=h.sources, words=health_words(h))
