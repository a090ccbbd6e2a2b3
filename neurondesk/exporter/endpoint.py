"""The OpenMetrics endpoint: a prometheus_client Collector over the last published Snapshot, and
the HTTP server that serves it (OpenMetrics or the text format, by the scraper's Accept header; its
connections time out and are capped: exporter/http_server.py).

``MetricsExporter.publish(state, now)`` is called by the thread that owns the state (at most every
``min_interval_s``); scrapes run in the server's threads and read only the published Snapshot.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from neurondesk.core.figures.metric_names import EXPORTED
from neurondesk.core.reduce.state import RunState
from neurondesk.exporter.goodput import goodput_families
from neurondesk.exporter.health import health_families
from neurondesk.exporter.http_server import serve
from neurondesk.exporter.job import job_families
from neurondesk.exporter.memory import memory_families
from neurondesk.exporter.phases import phase_families
from neurondesk.exporter.snapshot import PHASES, STEP_BUCKETS, Snapshot, Snapshotter

PUBLISH_EVERY_S = 0.25
LABELS = ("job_id", "node", "run_id")


@dataclass(frozen=True)
class MetricsAddr:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_metrics_addr(text: str) -> MetricsAddr:
    """'[HOST:]PORT': a bare port means 127.0.0.1; '[::1]:9400' for IPv6. ValueError names the input."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535 or (sep and not host):
        raise ValueError(f"--metrics-addr {text!r}: expected [HOST:]PORT, e.g. 9400 or 0.0.0.0:9400")
    return MetricsAddr(host, number)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


class RunCollector(Collector):
    """Yields the metric families of the last Snapshot; nothing before the first one."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None  # replaced whole by the owner thread, read here

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        if s is None:
            return
        ids = [s.identity.job_id, s.identity.node, s.identity.run_id]
        yield from self._named(s, ids)
        hist = HistogramMetricFamily("neurondesk_step_duration_seconds", "Duration of steady steps",
                                     labels=LABELS)
        bounds = [*(f"{b:g}" for b in STEP_BUCKETS), "+Inf"]
        hist.add_metric(ids, list(zip(bounds, s.step_buckets, strict=True)), s.step_sum_s)
        yield hist
        compiles = CounterMetricFamily("neurondesk_compiles", "Compiles finished", labels=[*LABELS, "source",
                                                                                          "cause", "status"])
        for source, cause, status, n in s.compiles:
            compiles.add_metric([*ids, source, cause, status], n)
        yield compiles
        yield from self._breakdown(s, ids)
        if s.job_series is not None:
            yield from job_families(s, ids)
        yield from health_families(s, ids)
        yield from phase_families(s, ids)
        yield from memory_families(s, ids)
        yield from goodput_families(s, ids)

    @staticmethod
    def _named(s: Snapshot, ids: list[str]) -> Iterator[Metric]:
        """One series per row of core's names table (core/figures/metric_names.py) that is exported:
        a figure from the snapshot's RunFigures, anything else from its own quantities."""
        own = s.quantities()
        for name in EXPORTED:
            family = (CounterMetricFamily if name.counter else GaugeMetricFamily)(name.metric, name.help,
                                                                                labels=LABELS)
            value = getattr(s.figures, name.key) if name.figure else own[name.key]
            if _finite(value):
                family.add_metric(ids, value)
            yield family

    @staticmethod
    def _breakdown(s: Snapshot, ids: list[str]) -> Iterator[Metric]:
        phase = GaugeMetricFamily("neurondesk_phase", "1 for the run's phase", labels=[*LABELS, "phase"])
        for name in PHASES:
            phase.add_metric([*ids, name], 1 if name == s.phase else 0)
        yield phase
        presync = GaugeMetricFamily("neurondesk_rank_presync_seconds", "Median time before the sync, per rank",
                                    labels=[*LABELS, "rank"])
        step = GaugeMetricFamily("neurondesk_rank_step_duration_seconds", "Median steady step, per rank",
                                 labels=[*LABELS, "rank"])
        split = {"own_s": GaugeMetricFamily("neurondesk_rank_own_seconds", "Median steady step less its wait "
                                            "inside collectives, per rank", labels=[*LABELS, "rank"]),
                 "collective_s": GaugeMetricFamily("neurondesk_rank_collective_seconds", "Median time a steady "
                                                   "step spends inside collectives, per rank", labels=[*LABELS, "rank"]),
                 "data_wait_s": GaugeMetricFamily("neurondesk_rank_data_wait_seconds", "Median data wait a steady "
                                                  "step, per rank", labels=[*LABELS, "rank"])}
        for r in s.ranks:
            if _finite(r.presync_s):
                presync.add_metric([*ids, str(r.rank)], r.presync_s)
            if _finite(r.step_time_s):
                step.add_metric([*ids, str(r.rank)], r.step_time_s)
            for name, family in split.items():
                if _finite(getattr(r, name)):
                    family.add_metric([*ids, str(r.rank)], getattr(r, name))
        yield presync
        yield step
        yield from split.values()
        util = GaugeMetricFamily("neurondesk_neuroncore_utilization_ratio", "NeuronCore utilisation (0..1)",
                                 labels=[*LABELS, "neuroncore"])
        mem = GaugeMetricFamily("neurondesk_neuroncore_memory_used_bytes", "NeuronCore memory in use",
                                labels=[*LABELS, "neuroncore"])
        for c in s.cores:
            if _finite(c.utilization_ratio):
                util.add_metric([*ids, c.core], c.utilization_ratio)
            if c.memory_used_bytes is not None:
                mem.add_metric([*ids, c.core], c.memory_used_bytes)
        yield util
        yield mem
        info = InfoMetricFamily("neurondesk_run", "The run", labels=LABELS)
        info.add_metric(ids, {k: v for k, v in s.info.items() if k != "run_id"})
        yield info
        yield from RunCollector._disks(s, ids)

    @staticmethod
    def _disks(s: Snapshot, ids: list[str]) -> Iterator[Metric]:
        """The run folder's and the compile cache's filesystems (``holds``: what of the run is there)."""
        free = GaugeMetricFamily("neurondesk_disk_free_bytes", "Free space on a filesystem the run writes to",
                                 labels=[*LABELS, "holds"])
        size = GaugeMetricFamily("neurondesk_disk_size_bytes", "Size of a filesystem the run writes to",
                                 labels=[*LABELS, "holds"])
        full = GaugeMetricFamily("neurondesk_disk_full_in_seconds",
                                 "Time until the filesystem is full at its current growth (absent: not filling)",
                                 labels=[*LABELS, "holds"])
        for d in s.disks:
            free.add_metric([*ids, d.holds], d.free_bytes)
            size.add_metric([*ids, d.holds], d.total_bytes)
            if _finite(d.full_in_s):
                full.add_metric([*ids, d.holds], d.full_in_s)
        yield free
        yield size
        yield full
        lost = CounterMetricFamily("neurondesk_output_not_stored_bytes",
                                   "Bytes of the workload's output that could not be stored", labels=LABELS)
        lost.add_metric(ids, s.output_not_stored_bytes)
        yield lost


class MetricsExporter:
    """Serves one state's metrics; ``publish()`` from the owning thread, ``close()`` at the end."""

    def __init__(self, addr: MetricsAddr, job_id: str | None = None, node: str | None = None) -> None:
        self.addr = addr
        self.snapshotter = Snapshotter(job_id, node)
        self.collector = RunCollector()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._published = float("-inf")
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Binds the port (OSError when it is taken); connections bounded in time and number (http_server.py)."""
        self._server, self._thread = serve(self.addr.host, self.addr.port, make_wsgi_app(self.registry))
        if self.addr.port == 0:
            self.addr = MetricsAddr(self.addr.host, self._server.server_address[1])

    def publish(self, state: RunState, now: float, force: bool = False, live_now: float | None = None) -> None:
        """``now``: the state's clock; ``live_now``: the wall clock when they differ (a replay)."""
        mono = time.monotonic()
        if force or mono - self._published >= PUBLISH_EVERY_S:
            self._published = mono
            if live_now is not None:
                self.snapshotter.time_offset = live_now - now
            self.collector.snapshot = self.snapshotter.take(state, now)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def linger_metrics(exporter: MetricsExporter, grace_s: float, stop: Callable[[], bool]) -> None:
    """After the run: the final figures stay served ``grace_s`` more (the default 60 s: two scrapes
    at a 30 s interval), so the job view sees the node finished or failed, not stale; a SIGTERM
    (``stop``) ends it early. The run folder is complete and unlocked by then."""
    deadline = time.monotonic() + max(0.0, grace_s)
    while time.monotonic() < deadline and not stop():
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    exporter.close()
