"""Memory that creeps as Prometheus series (core/findings/memory_creep.py computes it; read from the snapshot's
RunFigures, as summary.json's ``memory_creep``): per creeping series, its pace and, where its limit
is known, the time until it is reached, so an alert rule can say "a rank runs out within 2 h"
(``neurondesk_memory_creep_seconds_to_limit < 7200``). Base units (bytes, seconds), as Prometheus
wants them. No creep: no series (never 0). One or two series per leak; a run that leaks nowhere
adds none."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

LABELS = ("job_id", "node", "run_id")
LEAK_LABELS = ("memory", "rank", "device")


def memory_families(s, ids: list[str]) -> Iterator[Metric]:
    """``s``: an exporter/snapshot.py Snapshot (its ``figures.memory_creep``: a MemoryCreep or None)."""
    creep = s.figures.memory_creep
    pace = GaugeMetricFamily("neurondesk_memory_creep_bytes_per_second",
                             "A memory series that creeps over the steady steps: its robust slope, bytes a second "
                             "(memory: host_rss | neuron | cuda)", labels=[*LABELS, *LEAK_LABELS])
    left = GaugeMetricFamily("neurondesk_memory_creep_seconds_to_limit",
                             "Seconds until a creeping series reaches its limit at this pace (cgroup, host, HBM, GPU)",
                             labels=[*LABELS, *LEAK_LABELS])
    for x in creep.leaks if creep is not None else []:
        labels = [*ids, x.memory, "" if x.rank is None else str(x.rank), x.device or ""]
        pace.add_metric(labels, x.bytes_per_hour / 3600.0)
        if x.hours_to_limit is not None:
            left.add_metric(labels, x.hours_to_limit * 3600.0)
    yield pace
    yield left
