"""Goodput as Prometheus series (core/figures/goodput.py computes it; read from the snapshot's RunFigures):
``neurondesk_goodput_ratio`` (productive training time / wall time), ``neurondesk_badput_seconds_total{kind}``
(seconds by badput kind) and ``neurondesk_restarts_total`` (the job's restarts). 11 series a node.

Badput seconds are a counter that may step back a little: the time between two steps is "other" until a
restart's first step says it was the recovery."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from neurondesk.core.figures.goodput import KINDS

LABELS = ("job_id", "node", "run_id")


def goodput_families(s, ids: list[str]) -> Iterator[Metric]:
    """``s``: an exporter/snapshot.py Snapshot (its ``figures.goodput``: a Goodput or None)."""
    g = s.figures.goodput
    ratio = GaugeMetricFamily("neurondesk_goodput_ratio", "Productive training time / wall time (core/figures/goodput.py)",
                              labels=LABELS)
    badput = CounterMetricFamily("neurondesk_badput_seconds", "Seconds of the wall time that did not move the model "
                                 "forward, by kind", labels=[*LABELS, "kind"])
    restarts = CounterMetricFamily("neurondesk_restarts", "Restarts of the job (attempts after the first)",
                                   labels=LABELS)
    if g is not None:
        if g.fraction is not None:
            ratio.add_metric(ids, g.fraction)
        for kind in KINDS:
            badput.add_metric([*ids, kind], g.badput.get(kind, 0.0))
        restarts.add_metric(ids, g.restarts)
    yield ratio
    yield badput
    yield restarts
