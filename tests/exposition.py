"""A node's Prometheus exposition, as the recorder serves it, for a reduced RunState (no server)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from neurondesk.core.reduce.state import RunState
from neurondesk.exporter.endpoint import RunCollector
from neurondesk.exporter.snapshot import Snapshotter


def exposition_text(state: RunState) -> str:
    collector = RunCollector()
    collector.snapshot = Snapshotter("job", "node").take(state, state.last_t)
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def exposition(state: RunState) -> dict[str, list]:
    """Samples by series name."""
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(exposition_text(state)):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out
