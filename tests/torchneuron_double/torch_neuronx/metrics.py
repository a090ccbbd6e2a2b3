"""``torch_neuronx.metrics``: counters and timed metrics, collected when
``TORCH_NEURONX_METRICS_ENABLED`` is 1 / true / yes (off by default)."""

from __future__ import annotations

import os

_ENABLED = os.environ.get("TORCH_NEURONX_METRICS_ENABLED", "").lower() in ("1", "true", "yes")
_counters: dict[str, int] = {}
_metrics: dict[str, list[float]] = {}  # name -> [accumulator (ns), samples]


def is_enabled() -> bool:
    return _ENABLED


def counter(name: str, n: int = 1) -> None:
    if _ENABLED:
        _counters[name] = _counters.get(name, 0) + n


def timed(name: str, ns: float) -> None:
    if _ENABLED:
        acc = _metrics.setdefault(name, [0.0, 0])
        acc[0] += ns
        acc[1] += 1


def get_counter_names() -> list[str]:
    return list(_counters)


def get_counter_value(name: str) -> int | None:
    return _counters.get(name)


def get_metric_names() -> list[str]:
    return list(_metrics)


def get_metric_data(name: str) -> dict | None:
    acc = _metrics.get(name)
    if acc is None:
        return None
    return {"accumulator": acc[0], "total_samples": acc[1], "repr": f"{acc[0] / 1e9:.3f}s"}


def report() -> str:
    lines = [f"Counter: {k}\n  Value: {v}" for k, v in _counters.items()]
    lines += [f"Metric: {k}\n  TotalSamples: {v[1]}\n  Accumulator: {v[0] / 1e9:.6f}s" for k, v in _metrics.items()]
    return "\n".join(lines)


# TORCHNEURON_DOUBLE_METRICS=renamed: a metrics module whose functions are not the ones neurondesk's
# probe calls (another torch-neuronx version): the same values under other names
if os.environ.get("TORCHNEURON_DOUBLE_METRICS") == "renamed":
    counter_value, metric_data = get_counter_value, get_metric_data
    del get_counter_value, get_metric_data
