"""TorchNeuron's NEFF compiles and cache (issue 44): what the probe reads from its metrics
(probe/bootstrap/_neurondesk_probe/backends/torchneuron.py) and what the recorder reads from its NEFF cache
log (collectors/torchneuron.py). Each is listed in core/events/registry.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from neurondesk.core.events.run_events import Event


@dataclass(frozen=True)
class NeffCompiles(Event):
    """The eager NEFF compiles of one step of one process, as TorchNeuron's metrics counted and
    timed them (CompilationCache.TotalCompilations, CompilationCache.CompilationTime): read at the
    end of a step in which they moved, sent before the step's own message. One message a step,
    however many NEFFs: the reducer makes it one group."""

    kind: ClassVar[str] = "neff_compiles"
    pid: int
    step: int  # the step they compiled in (a compile after the last step end: the step after it)
    count: int  # eager NEFFs (graphs of torch.compile left out: ``graphs``)
    duration_s: float | None = None  # their compile seconds (None: the metric was not there)
    graphs: int = 0  # NEFFs of torch.compile graphs in the same counter move (their dynamo compiles hold them)
    phase: str | None = None  # "train" | "eval"
    input_shapes: list[list[int]] | None = None  # the step's batch shape, as the probe saw it
    disk_hits: int | None = None  # CompilationCache.PersistentHits so far (this process)
    disk_misses: int | None = None
    # TorchNeuron's pipeline finished them after their step ended (issue 52 item 2): the step they finished
    # in, which waited for them, and how long after their own step's end the last of them finished
    finished_step: int | None = None
    after_step_s: float | None = None


@dataclass(frozen=True)
class NeffCacheTotals(Event):
    """TorchNeuron's compilation-cache counters of one process, totals so far: at the end of its
    first step and at its exit. A later one replaces an earlier one."""

    kind: ClassVar[str] = "neff_cache"
    pid: int
    step: int
    compiles: int = 0  # CompilationCache.TotalCompilations (eager and torch.compile graphs)
    compile_s: float | None = None  # CompilationCache.CompilationTime, summed
    memory_hits: int | None = None  # CompilationCache.InMemoryHits
    memory_misses: int | None = None
    disk_hits: int | None = None  # CompilationCache.PersistentHits: NEFFs the persistent cache served
    disk_misses: int | None = None
    evictions: int | None = None  # CompilationCache.Evictions: NEFFs the in-memory cache dropped (its bound reached)
    cache_dir: str | None = None  # the persistent NEFF cache folder it compiles into (None: off, or not said)
    at_exit: bool = False


@dataclass(frozen=True)
class NeffCacheLog(Event):
    """What TorchNeuron's log file (TORCH_NEURONX_LOG_FILE) said since the last read: its
    ``[NEFF_CACHE]`` lines counted, the warnings and errors passed on to the workload's stderr."""

    kind: ClassVar[str] = "neff_log"
    path: str
    misses: int = 0  # "Cache MISS for key": a NEFF the persistent cache did not have (it compiles)
    stores: int = 0  # "Storing NEFF for key": a compiled NEFF stored
    hits: int = 0  # "Cache HIT for key": a NEFF the persistent cache served
    relayed: int = 0  # lines passed on to the workload's own streams (warnings, errors)
    keys: int = 0  # distinct keys seen so far
    miss_ends: list[int] = field(default_factory=list)  # each MISS line's end, a byte offset in the file
    read_to: int | None = None  # the offset read up to (the file at the path)


@dataclass(frozen=True)
class NeffLogMark(Event):
    """The size of TorchNeuron's log file at the end of a step in which it grew, sent by the probe
    only when TorchNeuron's metrics cannot count compiles (off, or a metrics module without the
    functions the probe calls): the log's MISS lines up to ``size`` were written by then, so the
    reducer places them at ``step`` (core/reduce/compile/neff.py)."""

    kind: ClassVar[str] = "neff_log_mark"
    pid: int
    step: int  # the step that ended
    size: int  # the log file's size then (bytes)
    phase: str | None = None
    input_shapes: list[list[int]] | None = None  # the step's batch shape, as the probe saw it


@dataclass(frozen=True)
class NeuronDeviceMemory(Event):
    """TorchNeuron's device memory statistics of one process (issue 52 item 3), read by the probe at
    most once a second at a step end, and at its exit (a failure included): torch_neuronx/memory.py
    ``memory_stats(device)`` (``_C._get_memory_stats``), else ``torch.accelerator.memory_stats`` (Neuron
    2.34+); the device's capacity from ``torch.accelerator.get_memory_info`` where it answers. Bytes;
    None where the source did not give the figure (never 0 for unknown)."""

    kind: ClassVar[str] = "neuron_device_memory"
    pid: int
    step: int
    device: int | None = None  # the device index the statistics are of
    allocated: int | None = None  # allocated_bytes current / peak (peak since the process began or the last reset)
    allocated_peak: int | None = None
    reserved: int | None = None  # reserved_bytes: what the caching allocator holds from the runtime
    reserved_peak: int | None = None
    active: int | None = None  # active_bytes: in use by live tensors
    active_peak: int | None = None
    alloc_retries: int | None = None  # num_alloc_retries: allocations that succeeded only after the pool was pruned
    ooms: int | None = None  # num_ooms: allocations that failed for good (a device OOM)
    capacity: int | None = None  # the device's memory (torch.accelerator.get_memory_info's total)
    source: str = ""  # "torch_neuronx.memory" | "torch.accelerator"
    at: str = "step"  # "step" | "exit" (the process's end, a failure's too)
