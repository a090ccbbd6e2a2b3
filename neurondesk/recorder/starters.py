"""The recorder's optional helpers, started so that a failure is one notice and the run goes on."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.collectors.telemetry import Telemetry
from neurondesk.core.events import run_events as ev
from neurondesk.exporter.endpoint import MetricsExporter, parse_metrics_addr
from neurondesk.recorder.options import RunOptions


def start_exporter(o: RunOptions) -> tuple[MetricsExporter | None, ev.Notice | None]:
    """The OpenMetrics endpoint of --metrics-addr (None, None without one); a port that cannot be
    bound: (None, the notice that says so)."""
    if not o.metrics_addr:
        return None, None
    try:
        exporter = MetricsExporter(parse_metrics_addr(o.metrics_addr), o.job_id, o.node)
        exporter.start()
    except (OSError, ValueError) as exc:
        return None, ev.Notice(t=time.time(), level="error", source="metrics",
                               message=f"metrics not served on {o.metrics_addr}: {exc}")
    return exporter, None


def start_telemetry(o: RunOptions, put: Callable, tag: str, run_dir: Path,
                    workload_pid: int | None) -> tuple[Telemetry | None, ev.Notice | None]:
    """Device and host telemetry for the workload's process tree; telemetry is extra: a failure to
    start it is (None, a notice) and the run goes on without it."""
    try:
        telemetry = Telemetry(put, tag=tag, env=o.env, run_dir=run_dir, neuron_monitor_replay=o.neuron_monitor_replay,
                              neuron_observer=o.neuron_observer, graph_stats=o.graph_stats)
        telemetry.start(workload_pid)
    except Exception as exc:  # noqa: BLE001 - telemetry is extra; the run goes on without it
        return None, ev.Notice(t=time.time(), level="warn", source="telemetry", message=f"telemetry not started: {exc!r}")
    return telemetry, None
