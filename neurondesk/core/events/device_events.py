"""Device and host telemetry events (Neuron, NVIDIA, host CPU/memory, process tree, compile cache).

The collectors in ``neurondesk.collectors.devices`` build them; the core reduces them and the views
read them by attribute. What a tool reports per core, per GPU or per process is a small frozen
record (``NeuronCoreSample``, ``GpuReading``, ``ProcessInfo`` ...) with our own field names, never
the tool's raw keys. Every field is JSON-friendly, so an event written to the journal and read back
through ``core/events/codec.py`` is equal to the one written; journals recorded when these lists held plain
dicts decode into the same records (the codec builds the nested records from their JSON objects).

Code builds the records itself (``NeuronCoreSample(core=0, utilization=40.0, owner_pid=9)``) and
reads them by attribute: a sample given dicts keeps them as they are (only the codec turns JSON
objects into records), and a record has no ``record["field"]`` access.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from neurondesk.core.events.run_events import Event

# ---------------------------------------------------------------- inventory (neuron-ls, NVML, CPU)


@dataclass(frozen=True)
class NeuronProcess:
    pid: int | None
    command: str = ""  # may be "" (container) or already truncated by neuron-ls
    runtime_version: str | None = None  # None for "NA" (not a Neuron Runtime 2.x process)


@dataclass(frozen=True)
class NeuronDevice:
    index: int
    nc_count: int  # logical NeuronCores (what neuron-monitor's core keys count)
    core_ids: list[int]
    memory_bytes: int | None = None
    bdf: str | None = None  # "0000:00:1e.0" or the short "00:1e.0"; kept as printed
    cpu_affinity: str | None = None  # e.g. "0-31,64-95"
    numa_node: int | None = None  # -1 means no NUMA topology
    connected_to: list[int] = field(default_factory=list)
    processes: list[NeuronProcess] = field(default_factory=list)
    logical_nc_config: int | None = None  # trn2 only
    physical_nc_count: int | None = None  # only from the 2.21 trn2 table with a LOGICAL NC column


@dataclass(frozen=True)
class NeuronInventory:
    """What neuron-ls lists (parsed in collectors/devices/neuron_ls.py)."""

    devices: list[NeuronDevice]
    source: str  # "output-format-json" (2.34+) | "json" (--json-output) | "text"
    instance_type: str | None = None
    instance_id: str | None = None
    logical_nc_config: int | None = None
    warnings: list[str] = field(default_factory=list)  # entries or rows that were skipped
    ultraserver: dict[str, str] = field(default_factory=dict)  # 2.34's UltraServer fields, as printed

    @property
    def total_cores(self) -> int:
        return sum(d.nc_count for d in self.devices)

    @property
    def memory_bytes(self) -> int:
        return sum(d.memory_bytes or 0 for d in self.devices)

    def to_dict(self) -> dict[str, Any]:
        d = msgspec.to_builtins(self)
        d["total_cores"] = self.total_cores
        return d


@dataclass(frozen=True)
class GpuReading:
    """One GPU as NVML reads it; fields the GPU will not tell are None (``error`` when the GPU
    itself could not be opened)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    memory_total: int | None = None
    memory_used: int | None = None
    util_gpu: float | None = None  # %
    util_memory: float | None = None  # %
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu: int  # GpuReading.index
    used_memory: int | None = None


@dataclass(frozen=True)
class CpuInfo:
    model: str | None = None
    arch: str | None = None
    logical_cores: int | None = None
    physical_cores: int | None = None
    memory_total: int | None = None


@dataclass(frozen=True)
class DeviceInventory(Event):
    """What accelerators and CPU the machine has, or why a kind could not be read."""

    kind: ClassVar[str] = "device_inventory"
    neuron: NeuronInventory | None = None
    neuron_reason: str | None = None  # why ``neuron`` is None
    gpus: list[GpuReading] = field(default_factory=list)
    gpu_driver: str | None = None
    gpu_reason: str | None = None  # why there are no GPUs
    cpu: CpuInfo = field(default_factory=CpuInfo)


# ---------------------------------------------------------------- neuron-monitor


@dataclass(frozen=True)
class NeuronCoreSample:
    """One NeuronCore in one report, from the runtime that owns it ("owner wins", never summed)."""

    core: int | str  # global index; kept as text if neuron-monitor ever prints a non-number
    utilization: float | None = None  # %
    flops: int | None = None  # FLOP/s: effective_flops (runtimes 2.30+), else flops
    memory: dict[str, int] = field(default_factory=dict)  # category -> bytes
    memory_total: int | None = None  # bytes in use (the sum of ``memory``), not the core's capacity
    owner_pid: int | None = None  # None: nobody uses it
    owner_tag: str | None = None
    v3d: dict[str, float] | None = None  # trn2: physical core -> utilisation %


@dataclass(frozen=True)
class LoadedModel:
    model_id: int | None = None
    name: str = ""
    is_running: bool = False
    cores: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class NeuronRuntimeSample:
    """One Neuron runtime (process) in one report."""

    pid: int | None = None
    tag: str = ""
    error: str | None = None
    period: float | None = None  # seconds the execution figures cover
    executions: dict[str, int] = field(default_factory=dict)  # completed, failed, timed_out ...
    errors_by_class: dict[str, int] = field(default_factory=dict)
    total_latency: dict[str, float | None] | None = None  # percentile -> seconds
    device_latency: dict[str, float | None] | None = None
    vcpu_user: float | None = None
    vcpu_system: float | None = None
    host_memory: int | None = None
    device_memory: int | None = None
    host_breakdown: dict[str, int] = field(default_factory=dict)
    loaded_models: list[LoadedModel] = field(default_factory=list)

    @property
    def failed_executions(self) -> int:
        """Executions in the period that did not simply complete (every status but "completed")."""
        return sum(v for k, v in self.executions.items() if k != "completed")


@dataclass(frozen=True)
class NeuronHardware:
    """neuron-monitor's ``neuron_hardware_info`` (tools before 2.18.3 give only the two counts)."""

    device_type: str | None = None  # "trainium", "trainium2", "inferentia2"
    device_version: str | None = None
    core_version: str | None = None
    device_count: int | None = None
    device_memory_bytes: int | None = None  # per device
    cores_per_device: int | None = None  # the cores neuron-monitor's core keys count
    logical_nc_config: int | None = None

    @property
    def core_memory_bytes(self) -> int | None:
        """Device memory per NeuronCore (capacity), when both are known."""
        if not self.device_memory_bytes or not self.cores_per_device:
            return None
        return self.device_memory_bytes // self.cores_per_device

    @property
    def total_cores(self) -> int | None:
        if self.device_count is None or self.cores_per_device is None:
            return None
        return self.device_count * self.cores_per_device


@dataclass(frozen=True)
class NeuronSample(Event):
    """One neuron-monitor report: per core (``cores``), per runtime (``runtimes``) and the host.
    ``raw`` is the line as read."""

    kind: ClassVar[str] = "neuron_sample"
    raw: str = ""
    cores: list[NeuronCoreSample] = field(default_factory=list)
    runtimes: list[NeuronRuntimeSample] = field(default_factory=list)
    executions_completed: int = 0  # summed over runtimes (each counts its own executions)
    errors_by_class: dict[str, int] = field(default_factory=dict)
    host_vcpu: dict[str, float] = field(default_factory=dict)  # average_usage: user, system, idle ...
    host_vcpu_busy: dict[str, float] = field(default_factory=dict)  # per vCPU: 100 - idle
    host_memory_total: int | None = None
    host_memory_used: int | None = None
    swap_total: int | None = None
    swap_used: int | None = None
    ecc: list[dict[str, int]] = field(default_factory=list)  # per device: counter -> count
    instance_type: str | None = None
    hardware: dict[str, Any] = field(default_factory=dict)  # as printed; read ``hardware_info``
    group_errors: list[str] = field(default_factory=list)  # non-empty "error" strings: shown, not fatal
    hardware_info: NeuronHardware | None = None  # None in journals recorded before it was read

    @property
    def execution_errors_per_s(self) -> float | None:
        """Failed executions per second over the runtimes' periods; None when none reports a period."""
        rates = [r.failed_executions / r.period for r in self.runtimes if r.period]
        return sum(rates) if rates else None


# ---------------------------------------------------------------- node health (collectors/devices/neuron_observer_health.py)


@dataclass(frozen=True)
class NodeHealthSample(Event):
    """A node's health counters as one source read them: ``counters`` maps core/node/node_health.py's
    names (efa_retransmits, efa_errors, neuronlink_errors, hbm_ecc_corrected, ...) to the count
    since the device or daemon started, summed over the node's devices; ``names`` the source's own
    metric names each was read from."""

    kind: ClassVar[str] = "node_health_sample"
    source: str = ""  # "neuron-observer http://..."
    counters: dict[str, float] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)


# ---------------------------------------------------------------- NVML


@dataclass(frozen=True)
class GpuSample(Event):
    """NVML reading: every GPU, and the memory each watched process holds on which GPU."""

    kind: ClassVar[str] = "gpu_sample"
    gpus: list[GpuReading] = field(default_factory=list)
    driver: str | None = None
    processes: list[GpuProcess] = field(default_factory=list)
    error: str | None = None


# ---------------------------------------------------------------- host (psutil)


@dataclass(frozen=True)
class HostSample(Event):
    kind: ClassVar[str] = "host_sample"
    cpu_percent: float | None = None  # whole machine, None on the first sample (no interval yet)
    per_cpu_percent: list[float] = field(default_factory=list)
    memory_total: int = 0
    memory_used: int = 0
    memory_available: int = 0
    swap_total: int = 0
    swap_used: int = 0


@dataclass(frozen=True)
class ProcessInfo:
    """One process of the workload's tree. ``role``: main | rank | dataloader | compiler | helper |
    other."""

    pid: int
    ppid: int = 0
    name: str = ""
    role: str = "other"
    cpu_percent: float = 0.0  # since the previous sample (0.0 the first time a process is seen)
    cpu_time_s: float = 0.0
    rss: int = 0
    threads: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class CompilerProcess:
    pid: int
    cpu_percent: float = 0.0
    cpu_time_s: float = 0.0
    elapsed_s: float = 0.0
    cmdline: str = ""


@dataclass(frozen=True)
class ProcessTreeSample(Event):
    """The workload's process tree; ``compilers``: the compiler processes only."""

    kind: ClassVar[str] = "process_tree"
    root_pid: int = 0
    root_alive: bool = True
    processes: list[ProcessInfo] = field(default_factory=list)
    total_cpu_percent: float = 0.0
    total_rss: int = 0
    dataloader_workers: int = 0
    dataloader_cpu_percent: float = 0.0
    compilers: list[CompilerProcess] = field(default_factory=list)


@dataclass(frozen=True)
class CgroupMemory(Event):
    """The memory cgroup of the workload's main process (collectors/cgroup_memory.py): read when the
    process is first seen in it or moves to another, and once more at the workload's exit (``final``).
    Counts are the cgroup's since neurondesk first read it (a cgroup's older events are not the run's)."""

    kind: ClassVar[str] = "cgroup_memory"
    pid: int = 0
    path: str = ""  # as /proc/PID/cgroup names it ("/user.slice/job-7"); "" when not read
    version: int = 0  # 1 or 2; 0: not read (``error`` says why)
    limit_bytes: int | None = None  # the tightest memory limit of it and its parents; None: no limit
    limit_path: str = ""  # the cgroup that holds that limit
    usage_bytes: int | None = None
    peak_bytes: int | None = None  # v2 memory.peak (kernel 5.19+), v1 memory.max_usage_in_bytes
    oom_kills: int | None = None  # processes the OOM killer killed in it (v2 memory.events, v1 memory.oom_control)
    limit_hits: int | None = None  # v2 memory.events "max", v1 memory.failcnt: the limit reached
    host_oom_kills: int | None = None  # /proc/vmstat oom_kill: the whole host's, since the first reading
    final: bool = False
    error: str | None = None


# ---------------------------------------------------------------- Neuron compile cache


@dataclass(frozen=True)
class CacheScan(Event):
    """One scan of the Neuron persistent compile cache."""

    kind: ClassVar[str] = "cache_scan"
    path: str = ""
    source: str = "default"  # "NEURON_CC_FLAGS" | "NEURON_COMPILE_CACHE_URL" | "default" | "given"
    remote: bool = False  # s3:// and the like: reported, not scanned
    exists: bool = False
    size_bytes: int | None = None
    entries: dict[str, int] = field(default_factory=dict)  # done | failed | locked | empty -> count
    compiler_versions: list[str] = field(default_factory=list)
    free_bytes: int | None = None
    disk_total_bytes: int | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


# ---------------------------------------------------------------- TorchNeuron graph_stats (collectors/devices/graph_stats.py)


@dataclass(frozen=True)
class NeuronGraphStat(Event):
    """One row of TorchNeuron's ``metric_table_graph_stats_rank{N}.csv``: a graph the rank compiled,
    with the time its FX passes, lowering and Neuron compile took. ``path`` and ``row`` name the
    row (read twice, it is one row)."""

    kind: ClassVar[str] = "neuron_graph_stat"
    path: str = ""
    row: int = 0
    rank: int | None = None
    graph_id: str | None = None  # the cache key
    graph_name: str | None = None
    model_name: str | None = None
    has_collectives: bool | None = None
    node_count: int | None = None
    timestamp: float | None = None  # epoch seconds, when the row's timestamp could be read
    fx_passes_s: float | None = None
    lower_s: float | None = None
    compile_s: float | None = None
    pid: int | None = None  # the process that read it (get_dynamo_metrics, read by the probe)
    # the dynamo compile at whose end the probe read it (its point, "dynamo@3:DYNAMO"): the compile that made the graph
    compile_point: str | None = None


# ---------------------------------------------------------------- Neuron faults (collectors/logparse/neuron_faults.py)


@dataclass(frozen=True)
class NeuronFault(Event):
    """A Neuron failure read from the workload's output, with what the line tells of it:
    ``fault`` is "device-oom" (the device's HBM), "compiler-oom" (neuronx-cc killed by the host's
    OOM killer) or "version-skew" (runtime, driver, compiler or framework built for another
    release), or one of TorchNeuron's (collectors/logparse/torchneuron_faults.py): "dynamic-shape"
    (NCC_EMOD025), "mode-ignored", "graph-fallback", "cpu-fallback". The LogError of the same line
    stays the error as printed; this is its meaning."""

    kind: ClassVar[str] = "neuron_fault"
    fault: str = ""
    line: str = ""  # the line it was read from, clipped
    pid: int | None = None
    size: str | None = None  # "172.000MB", as printed
    usage: str | None = None  # the memory category the allocation was for ("tensors")
    device: int | None = None  # ND
    core: int | None = None  # NC
    mem_log: str | None = None  # the runtime's allocation log (/tmp/nrt_mem_log_device_0_*.csv)
    mismatch: str | None = None  # what does not match, in words
    detail: str | None = None  # TorchNeuron's: the op run on the CPU, the mode ignored, the instruction and shape


@dataclass(frozen=True)
class NeuronProfileCapture(Event):
    """The run captures a Neuron Explorer profile (``run --neuron-profile``, or the user's own
    NEURON_RT_INSPECT_ENABLE=1): where it goes and the command that opens it."""

    kind: ClassVar[str] = "neuron_profile"
    folder: str = ""
    open_command: str = ""
    requested: bool = True  # --neuron-profile (False: the user's own environment switched it on)
    torch_profiler_at: str | None = None  # "train.py:42": the script also uses torch.profiler (they conflict)


# ---------------------------------------------------------------- disks (collectors/devices/disk.py)


@dataclass(frozen=True)
class FsReading:
    """One filesystem: what of the run it holds ("run folder", "compile cache"), the path it was
    read at, its free bytes (what an unprivileged writer can still use) and its size."""

    holds: list[str]
    path: str
    free_bytes: int
    total_bytes: int
    device: int = 0  # st_dev: two paths on one filesystem are one reading
    # the bytes of the run's own folders on it (run folder, compile caches: what it holds), a bounded walk;
    # None: not measured (too many files, or a journal from before it): whose writes they were is unknown
    own_bytes: int | None = None


@dataclass(frozen=True)
class DiskSample(Event):
    kind: ClassVar[str] = "disk_sample"
    filesystems: list[FsReading] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a path that could not be read, and why
