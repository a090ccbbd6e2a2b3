"""Device and host telemetry during a run: one collector per source, all feeding the run queue.

  inventory      once at start (neuron-ls, NVML, CPU)
  host           psutil, 1 Hz: machine CPU per core, memory
  process tree   psutil, 1 Hz: the workload's processes, DataLoader workers, compilers
  GPU            NVML, 1 Hz, when NVML opens
  Neuron         neuron-monitor (or a recorded stream), its own 1 s period, restarted on death
  compile cache  scanned at start and every 30 s

The sampling thread polls, then sleeps until the next period (re-armed after the poll, so a slow
poll never stacks up). A collector that fails says so once, as a Notice, and the rest go on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from neurondesk.collectors.devices.compile_cache import locate_cache, rescan
from neurondesk.collectors.devices.host import HostSampler, ProcessTreeSampler
from neurondesk.collectors.devices.inventory import collect_inventory, inventory_event
from neurondesk.collectors.devices.neuron_monitor import (
    NeuronMonitorProcess,
    replay_command,
    tag_filter_for,
)
from neurondesk.collectors.devices.nvml import NvmlSampler
from neurondesk.core.events import Event, Notice

PERIOD_S = 1.0
CACHE_EVERY_S = 30.0


class Telemetry:
    def __init__(self, emit: Callable[[Event], None], *, tag: str | None = None,
                 neuron_monitor_replay: str | None = None, env: dict[str, str] | None = None) -> None:
        self.emit = emit
        self.tag = tag
        self.replay = neuron_monitor_replay
        self.env = dict(os.environ if env is None else env)
        self.root_pid: int | None = None
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.monitor: NeuronMonitorProcess | None = None
        self.failed: set[str] = set()

    def start(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.thread = threading.Thread(target=self._loop, name="nd-telemetry", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.monitor is not None:
            self.monitor.stop()
        if self.thread is not None:
            self.thread.join(timeout=5)

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
        if self.replay:
            command = replay_command(self.replay, delay=1.0)
            self.monitor = NeuronMonitorProcess(self.emit, command, restart_on_clean_exit=False)
        elif inventory and inventory.get("neuron"):
            tag = tag_filter_for(self.tag) if self.tag else ".*"
            self.monitor = NeuronMonitorProcess(self.emit, tag_filter=tag)
        else:
            return  # no Neuron devices: the inventory already says why
        self.monitor.start()

    def _loop(self) -> None:
        inventory = self._guard("device inventory", collect_inventory)
        if inventory is not None:
            self.emit(inventory_event(inventory))
        self._guard("neuron-monitor", self._start_neuron_monitor, inventory)
        host = HostSampler()
        tree = ProcessTreeSampler(self.root_pid)
        nvml = NvmlSampler()
        nvml_ok = nvml.open() is None
        cache_at = self._guard("compile cache", locate_cache, self.env)
        last_scan, next_scan = None, 0.0
        while not self.stopping.is_set():
            started = time.monotonic()
            h = self._guard("host", host.sample)
            if h is not None:
                self.emit(h)
            p = self._guard("process tree", tree.sample)
            if p is not None:
                self.emit(p)
            if nvml_ok and "GPU" not in self.failed:
                pids = {proc["pid"] for proc in p.processes} if p is not None else None
                g = self._guard("GPU", nvml.sample, pids)
                if g is not None:
                    self.emit(g)
            if cache_at is not None and started >= next_scan:
                scan = self._guard("compile cache", rescan, last_scan, cache_at)
                if scan is not None:
                    self.emit(scan)
                    last_scan = scan
                next_scan = started + CACHE_EVERY_S
            self.stopping.wait(max(0.05, PERIOD_S - (time.monotonic() - started)))
        nvml.close()
