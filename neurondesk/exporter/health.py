"""The node's health counters as Prometheus series (core/node/node_health.py names and words them): one
counter per kind, summed over the node's devices, labelled like every series (job_id, node, run_id).
The counts are the devices' own (since the device or the daemon started), so a job view takes
``increase(...[1m])`` of them (core/node_health.increase_query); a counter not reported by any
source on this node has no sample, which tells "not measured" from 0."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from neurondesk.core.node.node_health import COUNTERS, HELP

LABELS = ("job_id", "node", "run_id")


def health_families(s, ids: list[str]) -> Iterator[Metric]:
    """``s``: an exporter/snapshot.py Snapshot (its ``health``: a NodeHealth or None)."""
    health = s.health
    totals = health.totals if health is not None else {}
    for counter in COUNTERS:
        family = CounterMetricFamily(f"neurondesk_{counter}", HELP[counter], labels=LABELS)
        value = totals.get(counter)
        if value is not None and value >= 0:
            family.add_metric(ids, value)
        yield family
