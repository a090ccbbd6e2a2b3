"""torch_xla ``metrics_report()`` / ``short_metrics_report()`` text -> numbers (NEURON-FORMATS §5.6).

Times come back in seconds, byte sizes in bytes (the report divides by 1024 per unit), anything
else as the plain float it prints. ``TransferToServerTime`` (torch-xla < 2.3) is reported under
its new name ``TransferToDeviceTime`` as well; the same for ``...FromServer...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._common import small_int

_TIME = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?(?:(\d+(?:\.\d+)?)us)?$")
_TIME_UNITS = (86400.0, 3600.0, 60.0, 1.0, 1e-3, 1e-6)
_BYTES = re.compile(r"^(\d+(?:\.\d+)?)(B|KB|MB|GB|TB|PB)$")
_BYTE_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50}
_OLD_NAMES = {
    "TransferToServerTime": "TransferToDeviceTime",
    "TransferFromServerTime": "TransferFromDeviceTime",
}


@dataclass
class Metric:
    total_samples: int | None = None
    accumulator: float | None = None
    unit: str | None = None  # "s" | "bytes" | None
    percentiles: dict[str, float] = field(default_factory=dict)  # "50%" -> value


@dataclass
class MetricsReport:
    metrics: dict[str, Metric] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)


def parse_value(text: str) -> tuple[float, str | None] | None:
    """'03m30s110ms000.000us' -> (210.11, 's'); '1.50GB' -> (bytes, 'bytes'); '9.00' -> (9.0, None)."""
    text = text.strip()
    m = _BYTES.match(text)
    if m:
        return float(m.group(1)) * _BYTE_UNITS[m.group(2)], "bytes"
    m = _TIME.match(text)
    if m and any(m.groups()):
        return sum(float(g) * u for g, u in zip(m.groups(), _TIME_UNITS, strict=True) if g), "s"
    try:
        return float(text), None
    except ValueError:
        return None


def parse_metrics_report(text: str) -> MetricsReport:
    report = MetricsReport()
    metric: Metric | None = None
    counter: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        key, _, value = line.partition(": ")
        if key == "Metric":
            metric, counter = Metric(), None
            report.metrics[value] = metric
            if value in _OLD_NAMES:
                report.metrics.setdefault(_OLD_NAMES[value], metric)
        elif key == "Counter":
            metric, counter = None, value
        elif key == "Value" and counter is not None and small_int(value) is not None:
            report.counters[counter] = small_int(value)
        elif metric is None:
            continue
        elif key == "TotalSamples" and small_int(value) is not None:
            metric.total_samples = small_int(value)
        elif key == "Accumulator":
            parsed = parse_value(value)
            if parsed:
                metric.accumulator, metric.unit = parsed
        elif key == "Percentiles":
            for item in value.split(";"):
                name, _, v = item.strip().partition("=")
                parsed = parse_value(v)
                if parsed:
                    metric.percentiles[name] = parsed[0]
    return report
