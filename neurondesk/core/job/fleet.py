"""The fleet: one row per node and run, as read from Prometheus, and the totals of its rows. Pure.

Rows come from clients/prometheus_api.py; ``keep_last`` carries a row's last known values
over refreshes where Prometheus no longer has them (a node that stopped reporting: stale).
The money of the totals ($/hour, cost so far) is the job figures' (core/job/job_figures.py), the
one computation the job view shows beside them: each row a node (``node_figures``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from neurondesk.core.job.job_figures import NodeFigures, job_figures
from neurondesk.core.node.flight_recorder import BlockedCollective

CLOCK_SKEW_S = 5.0  # a node's clock further off Prometheus's than this is said (scrapes are ~1 s apart)


@dataclass(frozen=True)
class NodeFailure:
    """The first failure a node's recorder saw (exporter/job.py)."""

    t: float | None  # the node's clock
    rank: int | None
    what: str  # "RuntimeError: ...", "exit 1", "SIGKILL"
    last_line: str
    step: int | None


@dataclass(frozen=True)
class RankRow:
    """One rank of a node, as Prometheus has it."""

    job_id: str
    node: str
    run_id: str
    rank: int
    presync_s: float | None = None  # median time before the sync (compute and data wait)
    step_time_s: float | None = None  # median steady step
    steps: int | None = None
    last_step_t: float | None = None  # the node's clock
    own_s: float | None = None  # median step less its wait inside collectives (None: the step not split)
    collective_s: float | None = None  # median time a step spends inside collectives
    data_wait_s: float | None = None  # median data wait a step (of the same steps as own_s)

    @property
    def wait_s(self) -> float | None:
        """Time of the step spent waiting for the others: inside collectives where the probe timed some,
        else what follows the pre-sync point (XLA: collectives not timed, every step's collective phase 0)."""
        if self.collective_s:
            return self.collective_s
        if self.presync_s is None or self.step_time_s is None:
            return None
        return max(0.0, self.step_time_s - self.presync_s)


@dataclass(frozen=True)
class ForeignNode:
    """A recorder scraped with this job's nodes that reports another job id."""

    instance: str
    node: str
    job_id: str
    scrape_job: str


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
    # the job of many nodes (core/job/job_view.py): who the node is, and what it is doing
    instance: str = ""  # Prometheus's target address
    node_rank: int | None = None
    nodes: int | None = None  # the job's node count, as this node's launcher says
    world_size: int | None = None
    launcher: str | None = None
    started_t: float | None = None
    step_time_s: float | None = None  # the node's steady step time (its slowest rank's median)
    tokens_per_s: float | None = None
    compile_s: float | None = None  # finished compiles' seconds
    compile_graph: int | None = None  # the graph being compiled (its number); None: none
    cache_hits: int | None = None
    cache_misses: int | None = None
    model_flops_per_s: float | None = None
    peak_flops_per_s: float | None = None
    finished: bool = False
    exit_code: int | None = None
    failure: NodeFailure | None = None
    clock_skew_s: float | None = None  # the node's clock minus Prometheus's, at the last scrape
    health: str | None = None  # core/node/node_health.py's words (EFA, NeuronLink, ECC, throttling); None: healthy
    blocked_collective: BlockedCollective | None = None  # from its ranks' Flight Recorder dumps at a hang
    step_verdict: str | None = None  # what bounds its steady step (core/figures/phases.py: "input-bound" ...); None: not yet

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.job_id, self.node, self.run_id)

    def stale_for_s(self, now: float) -> float | None:
        return None if not self.stale or self.last_update_t is None else max(0.0, now - self.last_update_t)

    @property
    def skew_s(self) -> float:
        """The node's clock skew its times are corrected by: 0 within CLOCK_SKEW_S (scrape jitter)."""
        skew = self.clock_skew_s
        return skew if skew is not None and abs(skew) > CLOCK_SKEW_S else 0.0


@dataclass(frozen=True)
class FleetTotals:
    nodes: int
    runs: int
    price_per_hour: float | None  # the job figures' (every row a node, stale ones too)
    cost_usd: float | None  # the job figures' total_usd
    slowest_node: str | None  # lowest steady samples/s (else steps/s) among the nodes still reporting
    slowest_rate: float | None
    slowest_unit: str | None  # "samples/s" | "steps/s"
    compiling_nodes: int
    stale_nodes: int


@dataclass(frozen=True)
class FleetRead:
    """One refresh: the node rows, their ranks, other jobs' recorders among them, Prometheus's time."""

    rows: list[FleetRow]
    ranks: list[RankRow]
    now: float
    foreign: list[ForeignNode] = dataclasses.field(default_factory=list)


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


def node_figures(r: FleetRow, now: float | None) -> NodeFigures:
    """A row as one node of a job: its figures, on Prometheus's clock. ``now``: Prometheus's time, for
    a row without an update time of its own (None: such a row counts no time)."""
    end = r.last_update_t if r.last_update_t is not None else None if now is None else now + r.skew_s
    elapsed = max(0.0, end - r.started_t) if r.started_t is not None and end is not None else 0.0
    return NodeFigures(node=r.node, elapsed_s=elapsed, steps=r.step or 0, price_per_hour=r.price_per_hour,
                       total_usd=r.cost_usd, step_time_s=r.step_time_s, samples_per_s=r.samples_per_s,
                       tokens_per_s=r.tokens_per_s, compile_total_s=(r.compile_s or 0.0) + (r.compiling_for_s or 0.0),
                       model_flops_per_s=r.model_flops_per_s, peak_flops_per_s=r.peak_flops_per_s)


def fleet_totals(rows: list[FleetRow], now: float | None = None) -> FleetTotals:
    """Counts of the rows, the slowest node still reporting, and the money as job_figures has it."""
    live = [r for r in rows if not r.stale]
    by_samples = [r for r in live if r.samples_per_s is not None]
    pool, unit = (by_samples, "samples/s") if by_samples else ([r for r in live if r.steps_per_s is not None],
                                                              "steps/s")
    slowest = min(pool, key=lambda r: r.samples_per_s if unit == "samples/s" else r.steps_per_s, default=None)
    rate = None if slowest is None else (slowest.samples_per_s if unit == "samples/s" else slowest.steps_per_s)
    money = job_figures([node_figures(r, now) for r in rows])
    return FleetTotals(
        nodes=len({r.node for r in rows}), runs=len(rows),
        price_per_hour=money.price_per_hour, cost_usd=money.total_usd,
        slowest_node=None if slowest is None else slowest.node, slowest_rate=rate,
        slowest_unit=None if slowest is None else unit,
        compiling_nodes=len({r.node for r in live if r.compiling_for_s is not None}),
        stale_nodes=len({r.node for r in rows if r.stale} - {r.node for r in live}))
