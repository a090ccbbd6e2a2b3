"""The steady step split into its phases as Prometheus series (core/figures/phases.py computes it; read from
the snapshot's RunFigures, the slowest rank's split as summary.json's): one gauge per phase the
backend can tell (a null phase has no sample: "not measured", never 0), seconds per steady step,
and the verdict as an info series. At most 8 series a node (docs/fleet.md's budget)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric

from neurondesk.core.figures.phases import NAMES

LABELS = ("job_id", "node", "run_id")


def phase_families(s, ids: list[str]) -> Iterator[Metric]:
    """``s``: an exporter/snapshot.py Snapshot (its ``figures.step_phases``: a StepPhases or None)."""
    p = s.figures.step_phases
    seconds = GaugeMetricFamily("neurondesk_step_phase_seconds",
                                "Seconds per steady step by phase (the slowest rank's; absent: the backend cannot tell)",
                                labels=[*LABELS, "phase"])
    verdict = InfoMetricFamily("neurondesk_step_verdict", "The phase that bounds the steady step (core/figures/phases.py)",
                               labels=LABELS)
    if p is not None:
        for name in NAMES:
            value = getattr(p, name)
            if value is not None:
                seconds.add_metric([*ids, name], value)
        if p.verdict is not None:
            verdict.add_metric(ids, {"verdict": p.verdict, "backend": p.backend})
    yield seconds
    yield verdict
