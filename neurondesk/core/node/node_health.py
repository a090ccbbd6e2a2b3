"""A node's health as a cause of its slowness (issue 33 item 8): its EFA retransmits and errors,
NeuronLink errors, HBM / SRAM ECC errors and throttling, as counts since the device started and
as what they grew by over the last minute, in one line of words ("trn-07: 412 EFA retransmits in
the last minute"), or None when the node is healthy.

Two callers, one rule: the recorder's reducer (core/reduce/node_health.py) builds a ``NodeHealth``
from the samples it saw; the job view builds one from what Prometheus returns for the series
``SERIES`` names (``words_from_series``; the PromQL is ``increase_query``). Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

WINDOW_S = 60.0
OBSERVER_SOURCE = "neuron-observer"  # how Neuron Observer's samples name their source (their ``raw``)

# our counter names, in the order the words list them: the gravest first
COUNTERS = ("hbm_ecc_uncorrected", "sram_ecc_uncorrected", "neuronlink_errors", "efa_errors",
            "efa_retransmits", "throttle_events", "hbm_ecc_corrected")
NOUNS = {
    "hbm_ecc_uncorrected": ("uncorrected HBM ECC error", "uncorrected HBM ECC errors"),
    "sram_ecc_uncorrected": ("uncorrected SRAM ECC error", "uncorrected SRAM ECC errors"),
    "neuronlink_errors": ("NeuronLink error", "NeuronLink errors"),
    "efa_errors": ("EFA error", "EFA errors"),
    "efa_retransmits": ("EFA retransmit", "EFA retransmits"),
    "throttle_events": ("throttling event", "throttling events"),
    "hbm_ecc_corrected": ("corrected HBM ECC error", "corrected HBM ECC errors"),
}
HELP = {
    "hbm_ecc_uncorrected": "Uncorrected ECC errors of the node's device memory (HBM), all devices",
    "sram_ecc_uncorrected": "Uncorrected ECC errors of the node's on-chip SRAM, all devices",
    "neuronlink_errors": "NeuronLink errors of the node's devices",
    "efa_errors": "EFA errors: retransmit timeouts, impaired or unresponsive remotes, RDMA work request errors",
    "efa_retransmits": "EFA packets retransmitted, all of the node's EFA devices",
    "throttle_events": "Times the node's devices were throttled",
    "hbm_ecc_corrected": "Corrected ECC errors of the node's device memory (HBM), all devices",
}
SERIES = {c: f"neurondesk_{c}_total" for c in COUNTERS}  # as scraped (prometheus_client adds _total)
STICKY = ("hbm_ecc_uncorrected", "sram_ecc_uncorrected")  # said even when none came in the window
# neuron-monitor's neuron_hw_counters (and Observer's neuron.device.*) per device -> ours
ECC_KEYS = {"mem_ecc_uncorrected": "hbm_ecc_uncorrected", "sram_ecc_uncorrected": "sram_ecc_uncorrected",
            "mem_ecc_corrected": "hbm_ecc_corrected"}


class NodeHealth(msgspec.Struct, frozen=True, kw_only=True):
    node: str
    totals: dict[str, float] = {}  # counter -> count as last read (since the device or daemon started)
    recent: dict[str, float] = {}  # counter -> what it grew by over ``window_s``
    window_s: float = 0.0  # what ``recent`` covers: WINDOW_S, less early in a run
    sources: list[str] = []


def ecc_counters(ecc: list[dict[str, int]]) -> dict[str, float]:
    """neuron-monitor's per-device ECC counters summed over the node's devices, by our names."""
    out: dict[str, float] = {}
    for device in ecc:
        for key, ours in ECC_KEYS.items():
            value = device.get(key)
            if isinstance(value, int | float) and value >= 0:
                out[ours] = out.get(ours, 0.0) + float(value)
    return out


def _count(n: float) -> str:
    return f"{n:,.0f}" if n >= 1 or n == 0 else f"{n:.2g}"


def _phrase(counter: str, n: float) -> str:
    one, many = NOUNS[counter]
    return f"{_count(n)} {one if round(n) == 1 else many}"


def _span(window_s: float) -> str:
    return "the last minute" if window_s >= WINDOW_S - 1 else f"the last {max(1, round(window_s))} s"


def health_words(h: NodeHealth) -> str | None:
    """"trn-07: 412 EFA retransmits, 3 EFA errors in the last minute; 2 uncorrected HBM ECC errors
    since the device started"; None when nothing grew in the window and no uncorrected error was ever
    counted."""
    recent = [_phrase(c, h.recent[c]) for c in COUNTERS if h.recent.get(c, 0) > 0]
    sticky = [_phrase(c, h.totals[c]) for c in STICKY if h.totals.get(c, 0) > 0 and not h.recent.get(c, 0) > 0]
    parts = []
    if recent:
        parts.append(f"{', '.join(recent)} in {_span(h.window_s)}")
    if sticky:
        parts.append(f"{', '.join(sticky)} since the device started")
    return f"{h.node}: {'; '.join(parts)}" if parts else None


def increase_query(counter: str, window: str = "1m") -> str:
    """The PromQL of what ``counter`` grew by over ``window``, one result per job and node."""
    return f"sum by (job_id, node) (increase({SERIES[counter]}[{window}]))"


def words_from_series(node: str, increases: Mapping[str, float], totals: Mapping[str, float] | None = None,
                      window_s: float = WINDOW_S) -> str | None:
    """The words for one node from Prometheus's answers: ``increases`` maps a series name of ``SERIES``
    (or our counter name) to ``increase_query``'s value for that node, ``totals`` the series' instant
    values. Names neither of ours are ignored; NaN (no samples in the window) counts as nothing."""
    by_series = {s: c for c, s in SERIES.items()}

    def ours(values: Mapping[str, float] | None) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, value in (values or {}).items():
            counter = by_series.get(name, name if name in SERIES else None)
            if counter is not None and value == value:  # NaN != NaN
                out[counter] = float(value)
        return out
    return health_words(NodeHealth(node=node, totals=ours(totals), recent=ours(increases), window_s=window_s))
