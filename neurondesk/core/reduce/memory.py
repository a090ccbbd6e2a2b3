"""Memory over the steady steps, per series: each rank's host RSS (the process tree's samples), each
NeuronCore's device memory (neuron-monitor's categories, summed; the owner process gives the rank),
each process's memory on each GPU (NVML: the CUDA caching allocator's pool and the context, as the
driver sees it), and the limits they run into (the workload's cgroup, the machine's memory, a core's
HBM share, a GPU's memory). core/findings/memory_creep.py runs the trend test (core/node/memory_trend.py) on them.

A sample counts when it is taken in steady state (the last step steady, no compile open, the run not
over): a compile's or a warm-up's memory is not a creep. Each series keeps at most MAX_POINTS samples
over the whole steady run: when full, every other one is dropped and from then on one sample in two
is kept (then one in four ...), so a run of days keeps its shape in bounded memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.registry import EVENT_TYPES
from neurondesk.core.node.memory_trend import Creep, creep
from neurondesk.core.reduce.compile.compiles import CompileReducer
from neurondesk.core.reduce.ranks import RankReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import StepReducer
from neurondesk.core.reduce.torchneuron_memory import DeviceMemory

MAX_POINTS = 200
RECHECK = 5  # samples between two trend tests of a series (5 s at 1 Hz)
CGROUP_KIND = "cgroup_memory"
MAX_SERIES = 1024  # a garbage report must not grow the table without end


@dataclass
class MemorySeries:
    """One memory figure over the steady samples: when (``ts``), bytes (``ys``), the rank's step then."""

    what: str  # "host_rss" | "neuron" | "cuda" | "torchneuron" (TorchNeuron's allocated bytes, per process)
    pid: int | None = None  # the process (a NeuronCore's owner)
    device: int | str | None = None  # the NeuronCore (neuron) or GPU index (cuda); None for host RSS
    ts: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    steps: list[int | None] = field(default_factory=list)
    categories: list[dict[str, int]] = field(default_factory=list)  # Neuron: each sample's bytes by category
    stride: int = 1  # one sample kept in ``stride``
    seen: int = 0
    version: int = 0
    _checked: int = -1
    _creep: Creep | None = None

    def add(self, t: float, value: float, step: int | None, categories: dict[str, int] | None = None) -> None:
        if not (math.isfinite(t) and math.isfinite(value)) or (self.ts and t <= self.ts[-1]):
            return  # a sample out of time order (a replayed clock step back) or not a number: left out
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        if len(self.ts) >= MAX_POINTS:
            for xs in (self.ts, self.ys, self.steps, self.categories):
                del xs[1::2]
            self.stride *= 2
        self.ts.append(t)
        self.ys.append(float(value))
        self.steps.append(step)
        if categories is not None:
            self.categories.append(dict(categories))
        self.version += 1

    def creep(self, exact: bool = False) -> Creep | None:
        """The trend test's answer, computed again once RECHECK samples were added since (a few ms on
        MAX_POINTS samples: a node of 32 ranks and their NeuronCores must not spend its second on
        it), or whenever one was and ``exact`` (the run is over: its summary has every sample)."""
        if self._checked < 0 or self.version - self._checked >= RECHECK or (exact and self._checked != self.version):
            self._creep, self._checked = creep(self.ts, self.ys), self.version
        return self._creep


@dataclass(frozen=True)
class MemoryLimit:
    """The workload's cgroup memory limit (the tightest of its own and its parents') and what the
    cgroup used when it was read (collectors/cgroup_memory.py's ``cgroup_memory`` events)."""

    limit_bytes: int
    used_bytes: int | None
    path: str


class MemoryReducer:
    _pending_rss: int | None = None  # a class default: a checkpoint written before it existed still loads
    torchneuron: DeviceMemory | None = None  # TorchNeuron's allocator statistics per process (made at the first)

    def __init__(self, run: RunReducer, steps: StepReducer, compiles: CompileReducer, ranks: RankReducer) -> None:
        self._run, self._steps, self._compiles, self._ranks = run, steps, compiles, ranks
        self.series: dict[tuple[str, int | None, int | str | None], MemorySeries] = {}
        self.limit: MemoryLimit | None = None
        self.tree_rss: int | None = None  # the workload's processes' RSS summed, last steady sample a step followed
        self._pending_rss: int | None = None
        self.host_available: int | None = None  # the machine's available memory, last sample
        self.gpu_room: dict[int, tuple[int, int]] = {}  # GPU index -> (total, used), last sample
        self.cwd = ""
        self.argv: dict[int, list[str]] = {}  # pid -> its argv (the probe's hello)

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        out = {"run_started": self.on_run_started, "process_attached": self.on_process_attached,
               "process_tree": self.on_process_tree, "neuron_sample": self.on_neuron_sample,
               "gpu_sample": self.on_gpu_sample, "host_sample": self.on_host_sample, "step": self.on_step,
               "steps": self.on_step, "neuron_device_memory": self.on_device_memory}
        if CGROUP_KIND in EVENT_TYPES:  # the workload's cgroup (collectors/cgroup_memory.py), where it is recorded
            out[CGROUP_KIND] = self.on_cgroup_memory
        return out

    def _steady(self) -> bool:
        return self._steps.last_step_steady and not self._compiles.compile_open and not self._run.finished

    def _series(self, what: str, pid: int | None, device: int | str | None) -> MemorySeries | None:
        key = (what, pid, device)
        s = self.series.get(key)
        if s is None and len(self.series) < MAX_SERIES:
            s = self.series[key] = MemorySeries(what, pid, device)
        return s

    def _step(self, pid: int | None) -> int | None:
        r = self._ranks.ranks.get(pid) if pid is not None else None
        return r.steps if r is not None else None

    def rank_of(self, pid: int | None) -> int | None:
        r = self._ranks.ranks.get(pid) if pid is not None else None
        if r is not None:
            return r.rank
        return self._ranks.declared.get(pid, (None, None))[0] if pid is not None else None

    def on_step(self, e: ev.Event) -> None:
        if self._pending_rss is not None:
            self.tree_rss, self._pending_rss = self._pending_rss, None

    def on_run_started(self, e: ev.RunStarted) -> None:
        self.cwd = e.cwd

    def on_process_attached(self, e: ev.ProcessAttached) -> None:
        if len(self.argv) < MAX_SERIES:
            self.argv[e.pid] = list(e.argv[:4])

    def on_host_sample(self, e: dev.HostSample) -> None:
        self.host_available = e.memory_available or None

    def on_cgroup_memory(self, e: ev.Event) -> None:
        limit = getattr(e, "limit_bytes", None)
        if isinstance(limit, int) and limit > 0:
            used = getattr(e, "usage_bytes", None)
            self.limit = MemoryLimit(limit, used if isinstance(used, int) else None,
                                     str(getattr(e, "limit_path", "") or getattr(e, "path", "")))

    def on_process_tree(self, e: dev.ProcessTreeSample) -> None:
        if not self._steady():
            return
        if e.processes:  # taken once a step ends after it: a tree sampled at the teardown holds less
            self._pending_rss = e.total_rss
        ranks = self._ranks.ranks
        for p in e.processes:
            if p.pid in ranks and p.rss > 0 and (s := self._series("host_rss", p.pid, None)) is not None:
                s.add(e.t, p.rss, self._step(p.pid))

    def on_neuron_sample(self, e: dev.NeuronSample) -> None:
        if not self._steady():
            return
        for c in e.cores:
            if not c.memory and c.memory_total is None:
                continue
            total = c.memory_total if c.memory_total is not None else sum(c.memory.values())
            s = self._series("neuron", c.owner_pid, c.core)
            if s is not None:
                s.add(e.t, total, self._step(c.owner_pid), c.memory)

    def on_device_memory(self, e: nf.NeuronDeviceMemory) -> None:
        """TorchNeuron's statistics: kept per rank always; its allocated bytes a creep series in steady state."""
        if self.torchneuron is None:
            self.torchneuron = DeviceMemory()
        self.torchneuron.add(e, self.rank_of(e.pid))
        if e.at == "step" and e.allocated is not None and self._steady():
            s = self._series("torchneuron", e.pid, e.device if e.device is not None else 0)
            if s is not None:
                s.add(e.t, e.allocated, self._step(e.pid))

    def on_gpu_sample(self, e: dev.GpuSample) -> None:
        self.gpu_room = {g.index: (g.memory_total, g.memory_used) for g in e.gpus
                         if g.memory_total is not None and g.memory_used is not None}
        if not self._steady():
            return
        for p in e.processes:
            if p.used_memory is not None and (s := self._series("cuda", p.pid, p.gpu)) is not None:
                s.add(e.t, p.used_memory, self._step(p.pid))
