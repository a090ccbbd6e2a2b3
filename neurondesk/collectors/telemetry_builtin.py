"""The polled telemetry sources neurondesk has (each a SourceSpec, see telemetry_source.py):

  disk           statvfs of the run folder's and the compile cache's filesystems, every 5 s
  host           psutil, 1 Hz: machine CPU per core, memory
  process tree   psutil, 1 Hz: the workload's processes, DataLoader workers, compilers
  compile cache  scanned at start and every 30 s
  Neuron Observer, graph_stats   where the run options point at them
  GPU            NVML, 1 Hz, when NVML opens
"""

from __future__ import annotations

import time
from pathlib import Path

from neurondesk.collectors.devices.compile_cache import locate_cache, rescan
from neurondesk.collectors.devices.disk import DiskSampler, disk_locations
from neurondesk.collectors.devices.graph_stats import GraphStatsFolder
from neurondesk.collectors.devices.host import HostSampler, ProcessTreeSampler
from neurondesk.collectors.devices.neuron_observer import ObserverSampler
from neurondesk.collectors.devices.neuron_observer_health import observer_events
from neurondesk.collectors.devices.nvml import NvmlSampler
from neurondesk.collectors.telemetry_source import Poller, SourceContext, SourceSpec

PERIOD_S = 1.0
CACHE_EVERY_S = 30.0
DISK_EVERY_S = 5.0


def _disk(ctx: SourceContext) -> Poller | None:
    if ctx.run_dir is None:
        return None
    return Poller(DiskSampler(disk_locations(ctx.run_dir, ctx.env)).sample)


def _tree(ctx: SourceContext) -> Poller:
    tree = ProcessTreeSampler(ctx.root_pid)

    def poll():
        p = tree.sample()
        if p is not None:
            ctx.workload_pids = {proc.pid for proc in p.processes}
        return p
    return Poller(poll)


def _compile_cache(ctx: SourceContext) -> Poller | None:
    where = locate_cache(ctx.env)
    if where is None:
        return None
    last = [None]

    def poll():
        last[0] = rescan(last[0], where)
        return last[0]
    return Poller(poll)


def _observer(ctx: SourceContext) -> Poller | None:
    if not ctx.neuron_observer:
        return None
    observer = ObserverSampler(ctx.neuron_observer)
    return Poller(lambda: observer_events(observer, time.time()))


def _graph_stats(ctx: SourceContext) -> Poller | None:
    if not ctx.graph_stats:
        return None
    folder = GraphStatsFolder(Path(ctx.graph_stats))
    return Poller(lambda: folder.poll(time.time()))


def _gpu(ctx: SourceContext) -> Poller | None:
    nvml = NvmlSampler()
    if nvml.open() is not None:  # no NVML here: the inventory says why
        return None
    return Poller(lambda: nvml.sample(ctx.workload_pids), close=nvml.close)


DISK = SourceSpec("disk", DISK_EVERY_S, _disk)
HOST = SourceSpec("host", PERIOD_S, lambda ctx: Poller(HostSampler().sample))
PROCESS_TREE = SourceSpec("process tree", PERIOD_S, _tree)
COMPILE_CACHE = SourceSpec("compile cache", CACHE_EVERY_S, _compile_cache)
NEURON_OBSERVER = SourceSpec("Neuron Observer", PERIOD_S, _observer)
GRAPH_STATS = SourceSpec("graph_stats", PERIOD_S, _graph_stats)
GPU = SourceSpec("GPU", PERIOD_S, _gpu)
