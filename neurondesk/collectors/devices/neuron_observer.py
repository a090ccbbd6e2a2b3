"""Neuron Observer (Neuron 2.33+, trn2/trn3, public beta): its Prometheus ``/metrics`` endpoint, read
as a further source of device samples beside neuron-monitor.

Observer names metrics ``neuron.{scope}.{name}`` (scope: device, core, vcpu, efa, system), with an
aggregation suffix ``.{strategy}`` (sum, avg, max, p50, p99) on aggregated exports; Prometheus
spells the dots as underscores (``neuron_core_utilization_avg``). Read here: per-core
``utilization`` (%) and per-device ``mem_ecc_*`` counters. Label names for the core and device
index are not documented in what was available; ``core``/``neuroncore``/``core_id`` and
``device``/``neurondevice``/``device_id`` are accepted.

Refusal: ``parse_exposition`` never raises; a line it cannot read is counted in ``problems`` and
kept in ``rejected`` (the first few). ``fetch`` returns text or an ``ObserverError``.
"""

from __future__ import annotations

import math
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from neurondesk.core.events.device_events import NeuronCoreSample, NeuronSample
from neurondesk.core.node.node_health import OBSERVER_SOURCE
from neurondesk.sinks.redact import basic_auth, redact, secret_values, shown_url

SCOPES = ("device", "core", "vcpu", "efa", "system")
STRATEGIES = ("sum", "avg", "max", "min", "p50", "p90", "p99")
CORE_LABELS = ("core", "neuroncore", "core_id", "neuron_core")
DEVICE_LABELS = ("device", "neurondevice", "device_id", "neuron_device")
REJECTED_KEPT = 5
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:.]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


@dataclass(frozen=True)
class ObserverMetric:
    scope: str
    name: str
    strategy: str | None
    labels: dict[str, str]
    value: float


@dataclass
class ObserverReading:
    metrics: list[ObserverMetric] = field(default_factory=list)
    problems: int = 0
    rejected: list[str] = field(default_factory=list)

    def reject(self, line: str) -> None:
        self.problems += 1
        if len(self.rejected) < REJECTED_KEPT:
            self.rejected.append(line[:200])


@dataclass(frozen=True)
class ObserverError:
    url: str
    reason: str


def _labels(text: str | None) -> dict[str, str] | None:
    if not text:
        return {}
    out, pos = {}, 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            return None
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def _split_name(name: str) -> tuple[str, str, str | None] | None:
    """``neuron_core_utilization_avg`` -> ("core", "utilization", "avg"); None when not Observer's."""
    parts = name.replace(".", "_").split("_")
    if len(parts) < 3 or parts[0] != "neuron" or parts[1] not in SCOPES:
        return None
    strategy = parts[-1] if parts[-1] in STRATEGIES and len(parts) > 3 else None
    rest = parts[2:-1] if strategy else parts[2:]
    return parts[1], "_".join(rest), strategy


def _metric(line: str) -> ObserverMetric | None | str:
    """An Observer metric, None for another exporter's line, "bad" for a line not read."""
    m = _LINE.match(line)
    if m is None:
        return "bad"
    split = _split_name(m.group(1))
    if split is None:
        return None
    labels = _labels(m.group(2))
    try:
        value = float(m.group(3))
    except ValueError:
        return "bad"
    if labels is None or not math.isfinite(value):
        return "bad"
    return ObserverMetric(scope=split[0], name=split[1], strategy=split[2], labels=labels, value=value)


def parse_exposition(text: str) -> ObserverReading:
    reading = ObserverReading()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        got = _metric(line)
        if got == "bad":
            reading.reject(line)
        elif isinstance(got, ObserverMetric):
            reading.metrics.append(got)
    return reading


def _index(labels: dict[str, str], names: tuple[str, ...]) -> int | str | None:
    for n in names:
        if n in labels:
            v = labels[n]
            return int(v) if v.isdigit() else v
    return None


def to_sample(reading: ObserverReading, t: float, source: str) -> NeuronSample | None:
    """Per-core utilisation (the native series, else the avg aggregate) and per-device ECC
    counters as a NeuronSample; None when the endpoint gave neither."""
    util: dict[int | str, float] = {}
    ecc: dict[int | str, dict[str, int]] = {}
    for m in reading.metrics:
        if m.scope == "core" and m.name == "utilization" and m.strategy in (None, "avg"):
            core = _index(m.labels, CORE_LABELS)
            if core is not None and (m.strategy is None or core not in util):
                util[core] = m.value
        elif m.scope == "device" and m.name.startswith("mem_ecc") and m.strategy in (None, "sum"):
            device = _index(m.labels, DEVICE_LABELS)
            ecc.setdefault(device if device is not None else 0, {})[m.name] = int(m.value)
    if not util and not ecc:
        return None
    cores = [NeuronCoreSample(core=c, utilization=u) for c, u in sorted(util.items(), key=lambda kv: str(kv[0]))]
    devices = [ecc[d] for d in sorted(ecc, key=str)]
    return NeuronSample(t=t, raw=source, cores=cores, ecc=devices)


def fetch(url: str, timeout: float = 2.0) -> str | ObserverError:
    """The endpoint's text (a URL's user info sent as Basic auth); an error says the URL and why without
    any credential (sinks/redact.py)."""
    bare, headers = basic_auth(url)
    try:
        req = urllib.request.Request(bare, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - a URL the user gave
            return r.read(8 << 20).decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return ObserverError(url=shown_url(url), reason=redact(str(exc), secret_values(urls=[url])))


class ObserverSampler:
    """One scrape per ``sample()``: a NeuronSample, or None (nothing Observer's, or unreachable:
    ``last_error`` says why)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.last_error: ObserverError | None = None
        self.problems = 0

    @property
    def source(self) -> str:
        return f"{OBSERVER_SOURCE} {shown_url(self.url)}"  # journaled with every sample: no credential

    def read(self) -> ObserverReading | None:
        """One scrape, parsed; None when the endpoint could not be read (``last_error`` says why)."""
        text = fetch(self.url)
        if isinstance(text, ObserverError):
            self.last_error = text
            return None
        reading = parse_exposition(text)
        self.problems += reading.problems
        return reading

    def sample(self, t: float) -> NeuronSample | None:
        reading = self.read()
        return None if reading is None else to_sample(reading, t, self.source)
