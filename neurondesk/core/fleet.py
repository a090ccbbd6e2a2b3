"""The fleet: one row per node and run, as read from Prometheus, and the job's totals. Pure.

Rows come from clients/prometheus_api.py; ``keep_last`` carries a row's last known values
over refreshes where Prometheus no longer has them (a node that stopped reporting: stale).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class FleetRow:
    job_id: str
    node: str
    run_id: str
    phase: str | None = None
    step: int | None = None
    steps_per_s: float | None = None
    samples_per_s: float | None = None  # steady
    compiling_for_s: float | None = None  # None: no compile in progress
    compiles: int | None = None
    recompiles_after_warmup: int | None = None
    stragglers: int | None = None
    data_wait_fraction: float | None = None  # of wall time, over the rate window
    price_per_hour: float | None = None
    cost_usd: float | None = None
    last_update_t: float | None = None  # the node's own clock, when it took these figures
    stale: bool = False  # not in Prometheus's latest scrape: the node stopped reporting

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.job_id, self.node, self.run_id)

    def stale_for_s(self, now: float) -> float | None:
        return None if not self.stale or self.last_update_t is None else max(0.0, now - self.last_update_t)


@dataclass(frozen=True)
class FleetTotals:
    nodes: int
    runs: int
    price_per_hour: float | None
    cost_usd: float | None
    slowest_node: str | None  # lowest steady samples/s (else steps/s) among the nodes still reporting
    slowest_rate: float | None
    slowest_unit: str | None  # "samples/s" | "steps/s"
    compiling_nodes: int
    stale_nodes: int


def keep_last(previous: dict[tuple[str, str, str], FleetRow], current: list[FleetRow]) -> list[FleetRow]:
    """Each current row with the gaps filled from its previous version when it is stale (a rate
    over a window that no longer holds samples is gone, the last one seen is not)."""
    out = []
    for row in current:
        before = previous.get(row.key)
        if row.stale and before is not None:
            filled = {f.name: getattr(before, f.name) for f in dataclasses.fields(row)
                      if getattr(row, f.name) is None}
            row = dataclasses.replace(row, **filled)
        out.append(row)
    return sorted(out, key=lambda r: (r.job_id, r.node, r.run_id))


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def fleet_totals(rows: list[FleetRow]) -> FleetTotals:
    live = [r for r in rows if not r.stale]
    by_samples = [r for r in live if r.samples_per_s is not None]
    pool, unit = (by_samples, "samples/s") if by_samples else ([r for r in live if r.steps_per_s is not None],
                                                              "steps/s")
    slowest = min(pool, key=lambda r: r.samples_per_s if unit == "samples/s" else r.steps_per_s, default=None)
    rate = None if slowest is None else (slowest.samples_per_s if unit == "samples/s" else slowest.steps_per_s)
    return FleetTotals(
        nodes=len({r.node for r in rows}), runs=len(rows),
        price_per_hour=_sum([r.price_per_hour for r in live]),
        cost_usd=_sum([r.cost_usd for r in rows]),
        slowest_node=None if slowest is None else slowest.node, slowest_rate=rate,
        slowest_unit=None if slowest is None else unit,
        compiling_nodes=len({r.node for r in live if r.compiling_for_s is not None}),
        stale_nodes=len({r.node for r in rows if r.stale} - {r.node for r in live}))
