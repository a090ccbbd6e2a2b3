"""``torch_neuronx.metrics``: counters and timed metrics, collected when
``TORCH_NEURONX_METRICS_ENABLED`` is 1 / true / yes (off by default).

As torch-neuronx's source has them (aws-neuron/torch-neuronx as stored in
parmoham-aws/test-repo-parmoham, commit 67d8dc4a): ``torch_neuronx/metrics.py`` (these functions, each
a call into ``_C``); ``torch_neuronx/csrc/core/NeuronBindings.cpp`` ``_neuron_metric_data`` (a dict of
``accumulator``, ``total_samples``, ``repr`` and ``samples``, a list of ``{timestamp_ns, value}``,
oldest first; None for a metric never recorded) and ``_neuron_counter_value`` (an int, None for a
counter never created); ``torch_neuronx/csrc/core/metrics/NeuronMetrics.{h,cpp}``:
``NeuronMetricData`` keeps the last 1024 samples in a ring, ``NeuronMetric::AddSample(value)``
stamps a sample with ``GetCurrentTimeNs()`` (``std::chrono::steady_clock``: CLOCK_MONOTONIC on
Linux, Python's ``time.monotonic_ns()``) when it is added, and ``TORCH_NEURONX_TIME_METRIC`` adds
the duration in nanoseconds after the timed section ended: a compile's sample is stamped at its end;
``InitMetricsEnabledFromEnv``: on for "1", "true", "TRUE", "yes", "YES" (the double lowercases)."""

from __future__ import annotations

import os
import threading
import time

_ENABLED = os.environ.get("TORCH_NEURONX_METRICS_ENABLED", "").lower() in ("1", "true", "yes")
MAX_SAMPLES = 1024  # NeuronMetricData's default ring
_counters: dict[str, int] = {}
_metrics: dict[str, list] = {}  # name -> [accumulator (ns), total samples, [(timestamp_ns, value)]]
_lock = threading.Lock()  # compiles finish on the pipeline's worker


def is_enabled() -> bool:
    return _ENABLED


def counter(name: str, n: int = 1) -> None:
    if _ENABLED:
        with _lock:
            _counters[name] = _counters.get(name, 0) + n


def timed(name: str, ns: float) -> None:
    """A sample of ``ns`` nanoseconds, stamped now (the end of what was timed)."""
    if _ENABLED:
        with _lock:
            acc = _metrics.setdefault(name, [0.0, 0, []])
            acc[0] += ns
            acc[1] += 1
            acc[2].append((time.monotonic_ns(), float(ns)))
            del acc[2][:-MAX_SAMPLES]


def get_counter_names() -> list[str]:
    return list(_counters)


def get_counter_value(name: str) -> int | None:
    return _counters.get(name)


def get_metric_names() -> list[str]:
    return list(_metrics)


def get_metric_data(name: str) -> dict | None:
    with _lock:
        acc = _metrics.get(name)
        if acc is None:
            return None
        return {"accumulator": acc[0], "total_samples": acc[1], "repr": f"{acc[0] / 1e9:.3f}s",
                "samples": [{"timestamp_ns": ts, "value": v} for ts, v in acc[2]]}


def report() -> str:
    lines = [f"Counter: {k}\n  Value: {v}" for k, v in _counters.items()]
    lines += [f"Metric: {k}\n  TotalSamples: {v[1]}\n  Accumulator: {v[0] / 1e9:.6f}s" for k, v in _metrics.items()]
    return "\n".join(lines)


# TORCHNEURON_DOUBLE_METRICS=renamed: a metrics module whose functions are not the ones neurondesk's
# probe calls (another torch-neuronx version): the same values under other names
if os.environ.get("TORCHNEURON_DOUBLE_METRICS") == "renamed":
    counter_value, metric_data = get_counter_value, get_metric_data
    del get_counter_value, get_metric_data
