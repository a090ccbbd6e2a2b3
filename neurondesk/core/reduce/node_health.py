"""A node's health counters over time (core/node/node_health.py names them): per source, the samples of
the last minute and the one before it, so that what each counter grew by over the last minute is
known; a counter that went down (the daemon or the driver restarted) grew by its new value, as
Prometheus's ``increase`` takes it. neuron-monitor's ECC counters come in its NeuronSample;
Neuron Observer's counters in a NodeHealthSample (its NeuronSample's ECC counters are the same
ones and are not taken twice). Bounded: one minute of samples per source."""

from __future__ import annotations

from collections import deque

from neurondesk.core.events import device_events as dev
from neurondesk.core.node.node_health import OBSERVER_SOURCE, WINDOW_S, NodeHealth, ecc_counters

KEEP = 600  # samples per source at most, whatever the rate


class NodeHealthReducer:
    def __init__(self) -> None:
        self._samples: dict[str, deque[tuple[float, dict[str, float]]]] = {}

    def on_health_sample(self, e: dev.NodeHealthSample) -> None:
        self.add(e.source or OBSERVER_SOURCE, e.t, e.counters)

    def on_neuron_sample(self, e: dev.NeuronSample) -> None:
        if e.ecc and not e.raw.startswith(OBSERVER_SOURCE):
            self.add("neuron-monitor", e.t, ecc_counters(e.ecc))

    def add(self, source: str, t: float, counters: dict[str, float]) -> None:
        if not counters:
            return
        kept = self._samples.setdefault(source, deque(maxlen=KEEP))
        if kept and t < kept[-1][0]:
            return  # out of order: the window runs forward only
        kept.append((t, dict(counters)))
        while len(kept) > 2 and kept[1][0] <= t - WINDOW_S:
            kept.popleft()  # kept[0] stays the last sample at or before the window's start

    def health(self, node: str) -> NodeHealth | None:
        """The node's counters (each from the source that read it last) and what they grew by over
        the last minute; None before any source reported one."""
        totals: dict[str, float] = {}
        recent: dict[str, float] = {}
        latest: dict[str, float] = {}
        window = 0.0
        for kept in self._samples.values():
            t_last = kept[-1][0]
            for counter, value in kept[-1][1].items():
                if t_last < latest.get(counter, float("-inf")):
                    continue
                latest[counter], totals[counter] = t_last, value
                grew, span = _increase(kept, counter)
                if span > 0:
                    recent[counter] = grew
                    window = max(window, span)
        if not totals:
            return None
        return NodeHealth(node=node, totals=totals, recent=recent, window_s=min(window, WINDOW_S),
                          sources=sorted(self._samples))


def _increase(kept: deque[tuple[float, dict[str, float]]], counter: str) -> tuple[float, float]:
    """What ``counter`` grew by from the first kept sample to the last, and the seconds between."""
    grew, prev, first_t = 0.0, None, None
    for t, counters in kept:
        value = counters.get(counter)
        if value is None:
            continue
        if prev is not None:
            grew += value - prev if value >= prev else value
        else:
            first_t = t
        prev = value
    return grew, (kept[-1][0] - first_t) if first_t is not None else 0.0
