"""Neuron Observer's node health counters (its Prometheus ``/metrics``, read by neuron_observer.py)
as a NodeHealthSample: EFA retransmits and errors, NeuronLink errors, device ECC errors, throttling.

What the documentation gives: Observer's names are ``neuron.{scope}.{name}[.{strategy}]`` (scopes
device, core, vcpu, efa, system; EFA and system metrics exported native, device metrics also as
``sum`` aggregates), its device counters include ``mem_ecc_uncorrected`` and its health signals
cover HBM uncorrectable errors, NeuronLink health and EFA network health. The EFA counter names
are the EFA driver's (``retrans_pkts``, ``retrans_timeout_events``, ``impaired_remote_conn_events``,
``unresponsive_remote_events``, ``rdma_read_wr_err``, ``rdma_write_wr_err``, as the CloudWatch
agent's EFA metrics name them). What it does not give, and is therefore matched loosely: the exact
NeuronLink and throttling names (a device metric with ``neuronlink``/``nlink`` and ``err`` in its
name; any metric with ``throttl`` in it). A trailing ``_total`` is dropped before matching.

Per counter, native series (no aggregation suffix) are summed over devices and ports; a ``sum``
aggregate is taken only where no native series was given, so one count is never taken twice.
"""

from __future__ import annotations

from neurondesk.collectors.devices.neuron_observer import (
    ObserverMetric,
    ObserverReading,
    ObserverSampler,
    to_sample,
)
from neurondesk.core.events.device_events import NeuronSample, NodeHealthSample
from neurondesk.core.node.node_health import ECC_KEYS

EFA_RETRANSMITS = ("retrans_pkts",)
EFA_ERRORS = ("retrans_timeout_events", "impaired_remote_conn_events", "unresponsive_remote_events",
              "rdma_read_wr_err", "rdma_write_wr_err")


def counter_of(m: ObserverMetric) -> str | None:
    """Our counter name for one Observer metric, None for one that is not a health counter."""
    name = m.name.removesuffix("_total")
    if m.scope == "efa":
        if name in EFA_RETRANSMITS:
            return "efa_retransmits"
        return "efa_errors" if name in EFA_ERRORS else None
    if "throttl" in name:
        return "throttle_events"
    if m.scope == "device":
        if name in ECC_KEYS:
            return ECC_KEYS[name]
        if ("neuronlink" in name or "nlink" in name) and "err" in name:
            return "neuronlink_errors"
    return None


def health_sample(reading: ObserverReading, t: float, source: str) -> NodeHealthSample | None:
    found: dict[str | None, dict[str, tuple[float, set[str]]]] = {None: {}, "sum": {}}  # strategy -> counter -> ...
    for m in reading.metrics:
        counter = counter_of(m)
        if counter is None or m.strategy not in found or m.value < 0:
            continue
        value, names = found[m.strategy].get(counter, (0.0, set()))
        names.add(f"neuron_{m.scope}_{m.name}" + (f"_{m.strategy}" if m.strategy else ""))
        found[m.strategy][counter] = (value + m.value, names)
    taken = {**found["sum"], **found[None]}  # native series win over the sum aggregate
    if not taken:
        return None
    return NodeHealthSample(t=t, source=source, counters={c: v for c, (v, _) in taken.items()},
                            names={c: sorted(n) for c, (_, n) in taken.items()})


def observer_events(sampler: ObserverSampler, t: float) -> list[NeuronSample | NodeHealthSample]:
    """One scrape of Observer: its device sample and the node's health counters (either may be absent)."""
    reading = sampler.read()
    if reading is None:
        return []
    got = (to_sample(reading, t, sampler.source), health_sample(reading, t, sampler.source))
    return [e for e in got if e is not None]
