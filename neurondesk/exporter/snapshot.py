"""RunState -> Prometheus figures: an immutable snapshot taken by the thread that owns the state.

Thread safety: the RunState is only ever read by the thread that reduces into it (the recorder's
pump loop, or a viewer's poll loop). That thread calls ``Snapshotter.take()`` between two
``apply()``s and publishes the frozen ``Snapshot`` by swapping one attribute (atomic in CPython);
the HTTP server's threads only read the last published snapshot (endpoint.RunCollector). A
scrape never touches the RunState, so it can neither race the reducer nor mutate anything.

The figures (rates, cost, MFU ...) are core's (core/figures/run_figures.py), read, never recomputed. The
samples and tokens counters are the lead's totals over every step (core/reduce/steps.py), times the
world: the snapshotter adds what came since its last snapshot, so counters only go up. Replayed runs shift their recorded times by ``time_offset`` so that timestamps look live.
"""

from __future__ import annotations

import socket
from collections import Counter
from dataclasses import dataclass, field

import msgspec

from neurondesk.core.events.job_identity import JobIdentity
from neurondesk.core.figures.run_figures import RunFigures, run_figures
from neurondesk.core.node.node_health import NodeHealth
from neurondesk.core.reduce.state import RunState
from neurondesk.core.view.read_views import (
    DiskView,
    disk_view,
    job_identity,
    node_health,
    rank_rows,
    step_totals,
    straggler_count,
)
from neurondesk.exporter.job import JobSeries, job_series

# Bucket bounds (seconds) of the steady step-time histogram: 1 ms .. 2 min.
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
PHASES = ("starting", "compiling", "running", "input-bound", "hung", "finished")
STRAGGLER_EVERY_S = 5.0  # stragglers() compares every rank at every common step: not at every snapshot


@dataclass(frozen=True)
class Identity:
    """Labels on every series: which job, node and run it is (never `job`/`instance`: Prometheus's)."""

    job_id: str
    node: str
    run_id: str = ""


@dataclass(frozen=True)
class RankFigures:
    rank: int
    presync_s: float | None
    step_time_s: float | None
    steps: int
    last_step_t: float | None = None  # live scale
    own_s: float | None = None  # median step less its wait inside collectives (core/reduce/ranks.py)
    collective_s: float | None = None  # median wait inside collectives a step
    data_wait_s: float | None = None  # median data wait of the same steps


@dataclass(frozen=True)
class CoreFigures:
    core: str  # neuron-monitor's `neuroncore` label value
    utilization_ratio: float | None
    memory_used_bytes: int | None


@dataclass(frozen=True)
class DiskFigures:
    holds: str  # "run folder", "run folder+compile cache"
    free_bytes: int
    total_bytes: int
    full_in_s: float | None  # at the current growth rate; None when not filling or not measured yet


@dataclass(frozen=True)
class Snapshot:
    identity: Identity
    taken_t: float  # wall time (live scale) of the snapshot
    phase: str
    samples: int
    tokens: int
    data_wait_s: float
    step_buckets: tuple[int, ...]  # cumulative counts per STEP_BUCKETS bound, then +Inf
    step_sum_s: float
    compiles: tuple[tuple[str, str, str, int], ...]  # (source, cause, status, count)
    compile_since_t: float | None  # start of the compile in progress (live scale)
    executions_per_step: int | None
    figures: RunFigures  # core's figures: steps, compile time, rates, cost ... are read from it
    loss: float | None
    stragglers: int
    ranks: tuple[RankFigures, ...]
    cores: tuple[CoreFigures, ...]
    info: dict[str, str] = field(default_factory=dict)
    started_t: float | None = None
    finished: bool = False
    disks: tuple[DiskFigures, ...] = ()  # the run folder's and the compile cache's filesystems
    output_not_stored_bytes: int = 0  # of the workload's output (core/node/disk.py)
    job: JobIdentity | None = None  # node rank, nodes, world size ... (core/events/job_identity.py)
    job_series: JobSeries | None = None  # the series of a job of many nodes (job.py)
    health: NodeHealth | None = None  # EFA, NeuronLink, ECC, throttling counters (health.py)

    def quantities(self) -> dict[str, float | None]:
        """What is not a figure, by its key in core's names table (core/figures/metric_names.py)."""
        return {"loss": self.loss, "compile_in_progress": 0 if self.compile_since_t is None else 1,
                "samples": self.samples, "tokens": self.tokens, "data_wait_s": self.data_wait_s,
                "compile_started_t": self.compile_since_t, "executions_per_step": self.executions_per_step,
                "stragglers": self.stragglers, "started_t": self.started_t, "taken_t": self.taken_t}


def default_node() -> str:
    return socket.gethostname()


class Snapshotter:
    """Owned by the state's thread; ``take()`` reads the state and returns a frozen Snapshot."""

    def __init__(self, job_id: str | None = None, node: str | None = None, time_offset: float = 0.0) -> None:
        """``job_id`` / ``node``: given by the viewer (``--job``/``--node`` of attach, replay); None: the run's
        own identity, as its journal has it (core/events/job_identity.py: --job/--node of the run, then the launchers')."""
        self.job_id, self.node, self.time_offset = job_id, node, time_offset
        self._samples = 0
        self._tokens = 0
        self._samples_seen = self._tokens_seen = 0  # the lead's totals at the last snapshot
        self._cumulative = [0] * (len(STEP_BUCKETS) + 1)
        self._steady_seen = 0
        self._stragglers = 0
        self._stragglers_at = float("-inf")

    def _count_new_steps(self, state: RunState) -> None:
        totals, world = step_totals(state), max(1, state.world)
        self._samples += (totals.samples - self._samples_seen) * world
        self._tokens += (totals.tokens - self._tokens_seen) * world
        self._samples_seen, self._tokens_seen = totals.samples, totals.tokens
        times = state.steady_times  # a bounded sketch (core/node/sketch.py): counts by bound, to 0.5%
        if len(times) != self._steady_seen:
            below = [times.count_at_most(bound) for bound in STEP_BUCKETS]
            self._cumulative = [*below, len(times)]
            self._steady_seen = len(times)

    def take(self, state: RunState, now: float) -> Snapshot:
        """``now``: the state's clock (a replay's position as recorded wall time)."""
        self._count_new_steps(state)
        live = now + self.time_offset
        if now - self._stragglers_at >= STRAGGLER_EVERY_S or state.finished:
            self._stragglers_at = now
            self._stragglers = straggler_count(state)
        cumulative = self._cumulative
        since = state.open_compile_since()
        run_id, disk = state.run_id or "", disk_view(state)
        job = job_identity(state)
        job = msgspec.structs.replace(job, job_id=job.job_id if self.job_id is None else self.job_id,
                                      node=job.node or default_node() if self.node is None else self.node)
        return Snapshot(
            identity=Identity(job.job_id, job.node, run_id), job=job,
            job_series=job_series(state, self.time_offset, since is not None), taken_t=live, phase=state.phase(now)[0],
            samples=self._samples, tokens=self._tokens, data_wait_s=state.total_wait_s,
            step_buckets=tuple(cumulative), step_sum_s=state.steady_total_s, compiles=_compile_counts(state),
            compile_since_t=None if since is None else since + self.time_offset,
            executions_per_step=state.executions_per_step,
            figures=run_figures(state, now), loss=state.loss_last,
            stragglers=self._stragglers, ranks=_ranks(state, self.time_offset), cores=_cores(state),
            info={"run_id": run_id, "instance_type": state.instance_type or "",
                  "device_kind": state.device_kind or "",
                  "precision": str(state.precision or state.config.get("precision") or "")},
            started_t=None if state.started_t is None else state.started_t + self.time_offset,
            finished=state.finished, disks=_disks(disk),
            output_not_stored_bytes=disk.output_lost_bytes, health=node_health(state, job.node))


def _compile_counts(state: RunState) -> tuple[tuple[str, str, str, int], ...]:
    counts: Counter = Counter((c.source or "", c.cause or "", c.status) for c in state.compiles)
    return tuple((s, c, st, n) for (s, c, st), n in sorted(counts.items()))


def _ranks(state: RunState, offset: float) -> tuple[RankFigures, ...]:
    """Every rank that reports steps, one rank too: the job of many nodes compares them across nodes."""
    return tuple(RankFigures(r.rank, r.presync_s, r.step_time_s, r.steps,
                             None if r.last_step_t is None else r.last_step_t + offset,
                             r.own_s, r.collective_s, r.split_wait_s)
                 for r in rank_rows(state))


def _cores(state: RunState) -> tuple[CoreFigures, ...]:
    sample = state.neuron
    if sample is None:
        return ()
    return tuple(CoreFigures(str(c.core), None if c.utilization is None else c.utilization / 100.0,
                             c.memory_total) for c in sample.cores)


def _disks(disk: DiskView) -> tuple[DiskFigures, ...]:
    return tuple(DiskFigures("+".join(f.holds), f.free_bytes, f.total_bytes, f.full_in_s) for f in disk.filesystems)
