"""Device and host telemetry: the latest sample of each kind (views render them as they are), and
what is measured in steady state: device utilisation, neuron-monitor's hardware FLOPs and the
workload's CPU.

Process roles: the collector labels processes by their command line; here a process that reports
steps is a rank whatever its command line says (a ``torch_xla.launch`` child is started by
multiprocessing like a DataLoader worker), and a DataLoader worker is a child of a process that
runs steps. A process-tree sample counts as steady only once the step after it ended steady too:
a sample taken at teardown, after the last step, never does."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.node.sketch import QuantileSketch
from neurondesk.core.reduce.compile.compiles import CompileReducer
from neurondesk.core.reduce.compile.graph_stats import GraphStatsJoin
from neurondesk.core.reduce.neuron_faults import NeuronFaults
from neurondesk.core.reduce.neuron_memory import HbmHeadroom, NeuronMemoryPeaks
from neurondesk.core.reduce.node_health import NodeHealthReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import HISTORY, StepReducer

WORKER_NAMES = ("python", "pt_data_worker")  # torch's DataLoader worker renames itself pt_data_worker


@dataclass
class SteadyProcesses:
    """The workload's process tree over the samples taken in steady state."""

    samples: int = 0
    cpu_percent_sum: float = 0.0
    dataloader_cpu_percent_sum: float = 0.0
    dataloader_workers: int = 0  # the most seen in one steady sample
    host_cpu_percent_sum: float = 0.0  # the whole machine's CPU (psutil), over the host samples taken steady
    host_samples: int = 0

    def add(self, e: dev.ProcessTreeSample) -> None:
        self.samples += 1
        self.cpu_percent_sum += e.total_cpu_percent
        self.dataloader_cpu_percent_sum += e.dataloader_cpu_percent
        self.dataloader_workers = max(self.dataloader_workers, e.dataloader_workers)

    @property
    def cpu_percent(self) -> float | None:
        return self.cpu_percent_sum / self.samples if self.samples else None

    @property
    def dataloader_cpu_percent(self) -> float | None:
        return self.dataloader_cpu_percent_sum / self.samples if self.samples else None

    @property
    def host_cpu_percent(self) -> float | None:
        return self.host_cpu_percent_sum / self.host_samples if self.host_samples else None


def _worker_like(p: dev.ProcessInfo, parent: dev.ProcessInfo) -> bool:
    return p.role == "dataloader" or p.name == parent.name or p.name.startswith(WORKER_NAMES)


def _role(p: dev.ProcessInfo, ranks: set[int], by_pid: dict[int, dev.ProcessInfo], root: int) -> str:
    if p.pid == root or p.role in ("compiler", "helper"):
        return p.role
    if p.pid in ranks:
        return "rank"
    parent = by_pid.get(p.ppid)
    if parent is not None and p.ppid in ranks and _worker_like(p, parent):
        return "dataloader"
    return "other" if p.role == "dataloader" else p.role


def with_step_roles(e: dev.ProcessTreeSample, ranks: set[int]) -> dev.ProcessTreeSample:
    """``e`` with the roles the steps tell: ranks are the processes that report steps, DataLoader
    workers their children. Unchanged while no process of the tree has reported a step."""
    by_pid = {p.pid: p for p in e.processes}
    if not ranks & by_pid.keys():
        return e
    procs = [replace(p, role=_role(p, ranks, by_pid, e.root_pid)) for p in e.processes]
    workers = [p for p in procs if p.role == "dataloader"]
    return replace(e, processes=procs, dataloader_workers=len(workers),
                   dataloader_cpu_percent=round(sum(p.cpu_percent for p in workers), 2))


class TelemetryReducer:
    def __init__(self, run: RunReducer, steps: StepReducer, compiles: CompileReducer) -> None:
        self._run = run
        self._steps = steps
        self._compiles = compiles
        self.inventory: dev.DeviceInventory | None = None
        self.host: dev.HostSample | None = None
        self.process_tree: dev.ProcessTreeSample | None = None
        self.neuron: dev.NeuronSample | None = None
        self.gpu: dev.GpuSample | None = None
        self.cache: dev.CacheScan | None = None
        self.workload_cpu_history: deque[tuple[float, float]] = deque(maxlen=HISTORY)
        self.steady_processes = SteadyProcesses()
        self._step_pids: set[int] = set()
        self._pending_trees: list[dev.ProcessTreeSample] = []  # steady when the next step is
        # neuron-monitor's per-core `effective_flops`/`flops` (FLOP/s, cores with an owner summed), over the samples
        # taken in steady state: the HFU numerator is their mean
        self.hw_flops_sum = 0.0
        self.hw_flops_samples = 0
        # mean device utilisation (% over the cores / GPUs this run uses), one value per steady sample
        self.device_util_steady = QuantileSketch()  # bounded: a run of days samples it 100,000s of times
        self.device_util_source: str | None = None
        # device memory per NeuronCore: neuron-ls's (per core id), else neuron_hardware_info's
        self.neuron_hardware: dev.NeuronHardware | None = None
        self._ls_core_memory: dict[int, int] = {}
        # neuron-monitor's execution_stats summed over every report and runtime (each counts its own)
        self.executions_seen = False
        self.executions_completed_total = 0
        self.execution_errors_by_status: dict[str, int] = {}
        self.execution_errors_by_class: dict[str, int] = {}
        self.graph_stats = GraphStatsJoin(compiles)  # TorchNeuron graph_stats rows, per dynamo compile
        self.neuron_memory = NeuronMemoryPeaks()  # device memory by category: peaks per core, host
        self.faults = NeuronFaults()  # Neuron failures the output told: out of memory, version skew
        self.neuron_profile: dev.NeuronProfileCapture | None = None  # a Neuron Explorer capture of the run
        self.health = NodeHealthReducer()  # EFA, NeuronLink, ECC, throttling counters (core/node/node_health.py)
        self.cgroup: dev.CgroupMemory | None = None  # the workload's memory cgroup, latest reading (core/findings/crash.py)
        self.live_trees: tuple[dev.ProcessTreeSample, ...] = ()  # the last two process-tree samples with a process

    def handlers(self) -> dict[str, Callable]:
        return {"device_inventory": self.on_device_inventory, "host_sample": self.on_host_sample,
                "process_tree": self.on_process_tree, "neuron_sample": self.on_neuron_sample,
                "gpu_sample": self.on_gpu_sample, "cache_scan": self.on_cache_scan, "step": self.on_step, "steps": self.on_steps,
                "neuron_graph_stat": self.graph_stats.on_row, "neuron_fault": self.faults.on_fault,
                "neuron_profile": self.on_neuron_profile, "node_health_sample": self.health.on_health_sample,
                "cgroup_memory": self.on_cgroup_memory}

    def sampling_steady(self) -> bool:
        """A sample counts toward steady-state figures when the last step was steady and no
        compile is open."""
        return self._steady_after(self._steps.last_step_steady)

    def _steady_after(self, step_steady: bool) -> bool:
        return step_steady and not self._compiles.compile_open and not self._run.finished

    def _note_device_util(self, values: list[float], source: str) -> None:
        if values and self.sampling_steady():
            self.device_util_steady.append(sum(values) / len(values))
            self.device_util_source = source

    def on_device_inventory(self, e: dev.DeviceInventory) -> None:
        self.inventory = e
        devices = e.neuron.devices if e.neuron is not None else []
        self._ls_core_memory = {core: d.memory_bytes // d.nc_count for d in devices
                                if d.memory_bytes and d.nc_count for core in d.core_ids}

    def core_capacity(self, core: int | str) -> int | None:
        """Device memory of one NeuronCore (its device's memory / its cores), None when unknown;
        never the memory in use."""
        if isinstance(core, int) and core in self._ls_core_memory:
            return self._ls_core_memory[core]
        return self.neuron_hardware.core_memory_bytes if self.neuron_hardware is not None else None

    def hbm_headroom(self) -> HbmHeadroom | None:
        """What was left of the tightest NeuronCore's HBM at its peak (None without a capacity)."""
        return self.neuron_memory.headroom(self.core_capacity)

    def on_cgroup_memory(self, e: dev.CgroupMemory) -> None:
        if self.cgroup is None or not self.cgroup.final or e.final:  # a late poll never hides the exit's reading
            self.cgroup = e

    def on_neuron_profile(self, e: dev.NeuronProfileCapture) -> None:
        self.neuron_profile = e

    def on_host_sample(self, e: dev.HostSample) -> None:
        self.host = e
        if e.cpu_percent is not None and self.sampling_steady():
            self.steady_processes.host_cpu_percent_sum += e.cpu_percent
            self.steady_processes.host_samples += 1

    def on_process_tree(self, e: dev.ProcessTreeSample) -> None:
        e = with_step_roles(e, self._step_pids)
        self.process_tree = e
        if e.processes:  # the last two that saw the workload alive (the one after its death is empty; in the
            self.live_trees = (self.live_trees[-1:] + (e,))  # last, a dying process's RSS is 0)
        self.workload_cpu_history.append((e.t, e.total_cpu_percent))
        if self.sampling_steady():
            self._pending_trees.append(e)
        else:
            self._pending_trees.clear()

    def on_step(self, e: ev.StepEnded) -> None:
        """Runs after the StepReducer: ``sampling_steady`` tells whether this step was steady."""
        self._step_pids.add(e.pid)
        if self.sampling_steady():
            self._take_pending_trees()
        self._pending_trees.clear()

    def on_steps(self, b: ev.StepBatch) -> None:
        """A StepBatch: as its steps one by one, whose first alone finds pending trees."""
        self._step_pids.add(b.pid)
        if self._pending_trees and self._steady_after(self._steps.first_of_batch_steady):
            self._take_pending_trees()
        self._pending_trees.clear()

    def _take_pending_trees(self) -> None:
        for tree in self._pending_trees:
            self.steady_processes.add(with_step_roles(tree, self._step_pids))

    def on_neuron_sample(self, e: dev.NeuronSample) -> None:
        self.neuron = e
        if e.hardware_info is not None:
            self.neuron_hardware = e.hardware_info
        self._count_executions(e.runtimes)
        self.neuron_memory.add(e)
        self.health.on_neuron_sample(e)
        self._run.price_from_instance_info(e.instance_type)  # journals without the recorder's price only
        used = [c for c in e.cores if c.owner_pid is not None]
        self._note_device_util([float(c.utilization) for c in used if c.utilization is not None],
                               "neuron-monitor neuroncore_utilization")
        if self.sampling_steady():
            flops = [c.flops for c in used if c.flops is not None]
            if flops:
                self.hw_flops_sum += float(sum(flops))
                self.hw_flops_samples += 1

    def _count_executions(self, runtimes: list[dev.NeuronRuntimeSample]) -> None:
        for r in runtimes:
            self.executions_seen = self.executions_seen or bool(r.executions)
            self.executions_completed_total += r.executions.get("completed", 0)
            _add(self.execution_errors_by_status, {k: v for k, v in r.executions.items() if k != "completed"})
            _add(self.execution_errors_by_class, r.errors_by_class)

    def on_gpu_sample(self, e: dev.GpuSample) -> None:
        self.gpu = e
        ours = {p.gpu for p in e.processes}
        gpus = [g for g in e.gpus if not ours or g.index in ours]
        self._note_device_util([float(g.util_gpu) for g in gpus if g.util_gpu is not None],
                               "NVML utilization.gpu")

    def on_cache_scan(self, e: dev.CacheScan) -> None:
        self.cache = e


def _add(totals: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        if v > 0:
            totals[k] = totals.get(k, 0) + v
