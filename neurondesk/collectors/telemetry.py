"""Device and host telemetry during a run: one collector per source, all feeding the run queue.

  inventory      once at start (neuron-ls, NVML, CPU)
  host           psutil, 1 Hz: machine CPU per core, memory
  process tree   psutil, 1 Hz: the workload's processes, DataLoader workers, compilers
  GPU            NVML, 1 Hz, when NVML opens
  Neuron         neuron-monitor (or a recorded stream), its own 1 s period, restarted on death
  compile cache  scanned at start and every 30 s
  disks          statvfs of the run folder's and the compile cache's filesystems, every 5 s

Each source has its own thread: it polls, then sleeps until its next period (re-armed after the
poll, so a slow poll never stacks up, and never delays another source). A collector that fails
says so once, as a Notice, and the rest go on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.collectors.devices import find_neuron_tool
from neurondesk.collectors.devices.compile_cache import locate_cache, rescan
from neurondesk.collectors.devices.disk import DiskSampler, disk_locations
from neurondesk.collectors.devices.graph_stats import GraphStatsFolder
from neurondesk.collectors.devices.host import HostSampler, ProcessTreeSampler
from neurondesk.collectors.devices.inventory import collect_inventory, inventory_event
from neurondesk.collectors.devices.neuron_monitor import (
    NeuronMonitorProcess,
    replay_command,
    tag_filter_for,
)
from neurondesk.collectors.devices.neuron_observer import ObserverSampler
from neurondesk.collectors.devices.nvml import NvmlSampler
from neurondesk.core.events import Event, Notice

PERIOD_S = 1.0
CACHE_EVERY_S = 30.0
DISK_EVERY_S = 5.0


class Telemetry:
    """One sampling thread per source (host, process tree, GPU, compile cache; neuron-monitor is a
    process of its own), so a slow compile-cache walk or a stuck NVML call never delays the 1 Hz
    host samples. Each thread polls, then sleeps until its next period (re-armed after the poll)."""

    def __init__(self, emit: Callable[[Event], None], *, tag: str | None = None,
                 neuron_monitor_replay: str | None = None, env: dict[str, str] | None = None,
                 neuron_observer: str | None = None, graph_stats: str | None = None,
                 run_dir: str | Path | None = None) -> None:
        self.emit = emit
        self.run_dir = run_dir  # its disk (and the compile cache's) is watched
        self.observer_url = neuron_observer  # Neuron Observer's /metrics URL: device samples
        self.graph_stats_dir = graph_stats  # TorchNeuron graph_stats CSVs: compile events
        self.tag = tag
        self.replay = neuron_monitor_replay
        self.env = dict(os.environ if env is None else env)
        self.root_pid: int | None = None
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.monitor: NeuronMonitorProcess | None = None
        self.failed: set[str] = set()
        self.workload_pids: set[int] | None = None  # the process tree's latest, for NVML's per-process view

    def start(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self._spawn(self._start_sources, "nd-telemetry")

    def _spawn(self, target, name: str, *args) -> None:
        th = threading.Thread(target=target, args=args, name=name, daemon=True)
        th.start()
        self.threads.append(th)

    def stop(self) -> None:
        self.stopping.set()
        if self.monitor is not None:
            self.monitor.stop()
        for th in list(self.threads):
            th.join(timeout=5)

    def _guard(self, name: str, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - one broken collector must not stop the others
            if name not in self.failed:
                self.failed.add(name)
                self.emit(Notice(t=time.time(), level="warn", source="telemetry",
                                 message=f"{name} telemetry stopped: {exc!r}"))
            return None

    def _start_neuron_monitor(self, inventory: dict | None) -> None:
        """neuron-monitor runs when neuron-ls listed devices or, neuron-ls missing or failing, when
        the neuron-monitor executable exists (its neuron_hardware_info counts devices and cores)."""
        search_path = self.env.get("PATH")
        if self.replay:
            command = replay_command(self.replay, delay=1.0)
            self.monitor = NeuronMonitorProcess(self.emit, command, restart_on_clean_exit=False)
        elif (inventory and inventory.get("neuron")) or find_neuron_tool("neuron-monitor", search_path):
            tag = tag_filter_for(self.tag) if self.tag else ".*"
            self.monitor = NeuronMonitorProcess(self.emit, tag_filter=tag, search_path=search_path)
        else:
            return  # neither Neuron devices nor neuron-monitor: the inventory already says why
        self.monitor.start()

    def _every(self, name: str, period: float, sample) -> None:
        """Call ``sample()`` every ``period`` seconds until stopped; emit what it returns."""
        while not self.stopping.is_set() and name not in self.failed:
            started = time.monotonic()
            event = self._guard(name, sample)
            if event is not None:
                self.emit(event)
            self.stopping.wait(max(0.05, period - (time.monotonic() - started)))

    def _start_sources(self) -> None:
        if self.run_dir is not None:
            disks = self._guard("disk", lambda: DiskSampler(disk_locations(self.run_dir, self.env)))
            if disks is not None:
                self._spawn(self._every, "nd-disk", "disk", DISK_EVERY_S, disks.sample)
        host = HostSampler()
        self._spawn(self._every, "nd-host", "host", PERIOD_S, host.sample)
        tree = ProcessTreeSampler(self.root_pid)
        self._spawn(self._every, "nd-tree", "process tree", PERIOD_S, lambda: self._tree_sample(tree))
        inventory = self._guard("device inventory", collect_inventory)
        if inventory is not None:
            self.emit(inventory_event(inventory))
        self._guard("neuron-monitor", self._start_neuron_monitor, inventory)
        cache_at = self._guard("compile cache", locate_cache, self.env)
        if cache_at is not None:
            last = [None]

            def scan():
                last[0] = rescan(last[0], cache_at)
                return last[0]

            self._spawn(self._every, "nd-cache", "compile cache", CACHE_EVERY_S, scan)
        self._start_neuron_extras()
        nvml = NvmlSampler()
        if nvml.open() is None:
            try:
                self._every("GPU", PERIOD_S, lambda: nvml.sample(self.workload_pids))
            finally:
                nvml.close()

    def _start_neuron_extras(self) -> None:
        """Neuron Observer and graph_stats, where the run options point at them."""
        if self.observer_url:
            observer = ObserverSampler(self.observer_url)
            self._spawn(self._every, "nd-observer", "Neuron Observer", PERIOD_S, lambda: observer.sample(time.time()))
        if self.graph_stats_dir:
            folder = GraphStatsFolder(Path(self.graph_stats_dir))
            self._spawn(self._every, "nd-graph-stats", "graph_stats", PERIOD_S, lambda: self._emit_all(folder))

    def _emit_all(self, folder: GraphStatsFolder) -> None:
        for event in folder.poll(time.time()):
            self.emit(event)

    def _tree_sample(self, tree: ProcessTreeSampler):
        p = tree.sample()
        if p is not None:
            self.workload_pids = {proc.pid for proc in p.processes}
        return p
