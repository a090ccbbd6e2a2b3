"""Device and host telemetry events (Neuron, NVIDIA, host CPU/memory, process tree, compile cache).

Every field is JSON-friendly (str/int/float/bool/None, lists and dicts of those; dict keys are
strings), so ``event_to_dict`` -> JSON -> ``event_from_dict`` gives back an equal event. The
collectors in ``neurondesk.collectors.devices`` build them; the core only reduces them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from neurondesk.core.events import Event, register_event_type


@dataclass(frozen=True)
class DeviceInventory(Event):
    """What accelerators and CPU the machine has, or why a kind could not be read."""

    kind: ClassVar[str] = "device_inventory"
    neuron: dict[str, Any] | None = None  # NeuronInventory.to_dict()
    neuron_reason: str | None = None  # why ``neuron`` is None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    gpu_driver: str | None = None
    gpu_reason: str | None = None  # why there are no GPUs
    cpu: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NeuronSample(Event):
    """One neuron-monitor report, aggregated per core with "owner wins" (never summed).

    ``cores``: [{"core", "utilization", "flops", "memory": {category: bytes}, "memory_total",
    "owner_pid", "owner_tag", "v3d"}]. ``runtimes``: one dict per runtime (pid, tag, executions,
    errors by class, latency percentiles, vCPU, memory). ``raw`` is the line as read.
    """

    kind: ClassVar[str] = "neuron_sample"
    raw: str = ""
    cores: list[dict[str, Any]] = field(default_factory=list)
    runtimes: list[dict[str, Any]] = field(default_factory=list)
    executions_completed: int = 0  # summed over runtimes (each counts its own executions)
    errors_by_class: dict[str, int] = field(default_factory=dict)
    host_vcpu: dict[str, float] = field(default_factory=dict)  # average_usage: user, system, idle ...
    host_vcpu_busy: dict[str, float] = field(default_factory=dict)  # per vCPU: 100 - idle
    host_memory_total: int | None = None
    host_memory_used: int | None = None
    swap_total: int | None = None
    swap_used: int | None = None
    ecc: list[dict[str, int]] = field(default_factory=list)
    instance_type: str | None = None
    hardware: dict[str, Any] = field(default_factory=dict)
    group_errors: list[str] = field(default_factory=list)  # non-empty "error" strings: shown, not fatal


@dataclass(frozen=True)
class GpuSample(Event):
    """NVML reading. ``gpus``: [{"index", "name", "uuid", "memory_total", "memory_used",
    "util_gpu", "util_memory", "power_w", "power_limit_w", "temperature_c"}];
    ``processes``: [{"pid", "gpu", "used_memory"}] for the watched pids."""

    kind: ClassVar[str] = "gpu_sample"
    gpus: list[dict[str, Any]] = field(default_factory=list)
    driver: str | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


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
class ProcessTreeSample(Event):
    """The workload's process tree. ``processes``: [{"pid", "ppid", "name", "role", "cpu_percent",
    "cpu_time_s", "rss", "threads", "elapsed_s"}]; role is main | rank | dataloader | compiler |
    helper | other. ``compilers``: the compiler processes only (pid, cpu_percent, cpu_time_s,
    elapsed_s, cmdline)."""

    kind: ClassVar[str] = "process_tree"
    root_pid: int = 0
    root_alive: bool = True
    processes: list[dict[str, Any]] = field(default_factory=list)
    total_cpu_percent: float = 0.0
    total_rss: int = 0
    dataloader_workers: int = 0
    dataloader_cpu_percent: float = 0.0
    compilers: list[dict[str, Any]] = field(default_factory=list)


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


for _cls in (DeviceInventory, NeuronSample, GpuSample, HostSample, ProcessTreeSample, CacheScan):
    register_event_type(_cls)
del _cls
