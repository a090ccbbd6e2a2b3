"""Device and host telemetry during a run: the sources in SOURCES, plus the inventory (once, at
start) and neuron-monitor (a process of its own, restarted on death), all feeding the run queue.

Each polled source (telemetry_source.SourceSpec) has its own thread: it polls, then sleeps until its
next period (re-armed after the poll, so a slow poll never stacks up, and never delays another
source). A source that fails says so once, as a Notice, and the rest go on. A new source: a file
with its SourceSpec, and one line in SOURCES.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.collectors import telemetry_builtin as builtin
from neurondesk.collectors.devices import find_neuron_tool
from neurondesk.collectors.devices.inventory import collect_inventory, inventory_event
from neurondesk.collectors.devices.neuron_monitor import (
    NeuronMonitorProcess,
    replay_command,
    tag_filter_for,
)
from neurondesk.collectors.telemetry_source import Poller, SourceContext, SourceSpec
from neurondesk.core.events.run_events import Event, Notice

SOURCES: tuple[SourceSpec, ...] = (
    builtin.DISK, builtin.HOST, builtin.PROCESS_TREE, builtin.COMPILE_CACHE,
    builtin.NEURON_OBSERVER, builtin.GRAPH_STATS, builtin.GPU,
)


class Telemetry:
    """One sampling thread per source in ``sources`` (neuron-monitor is a process of its own), so a
    slow compile-cache walk or a stuck NVML call never delays the 1 Hz host samples."""

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
        self.sources = SOURCES

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

    def _every(self, spec: SourceSpec, poller: Poller) -> None:
        """Poll every ``spec.period_s`` seconds until stopped; emit what each poll returns."""
        try:
            while not self.stopping.is_set() and spec.name not in self.failed:
                started = time.monotonic()
                got = self._guard(spec.name, poller.poll)
                for event in ([got] if isinstance(got, Event) else got or ()):
                    self.emit(event)
                self.stopping.wait(max(0.05, spec.period_s - (time.monotonic() - started)))
        finally:
            if poller.close is not None:
                self._guard(spec.name, poller.close)

    def _start_sources(self) -> None:
        ctx = SourceContext(root_pid=self.root_pid, env=self.env,
                            run_dir=Path(self.run_dir) if self.run_dir is not None else None,
                            neuron_observer=self.observer_url, graph_stats=self.graph_stats_dir)
        inventory = self._guard("device inventory", collect_inventory)
        if inventory is not None:
            self.emit(inventory_event(inventory))
        self._guard("neuron-monitor", self._start_neuron_monitor, inventory)
        for spec in self.sources:
            poller = self._guard(spec.name, spec.open, ctx)
            if poller is not None:
                self._spawn(self._every, f"nd-{spec.name.replace(' ', '-')}", spec, poller)
