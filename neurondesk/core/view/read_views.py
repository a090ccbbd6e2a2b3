"""Typed, immutable readings of a run for the parts outside core (the exporter, the sinks, the reports,
the recorder's desks, the sources, the cli), as the console reads RunView (run_view.py). Outside core
nothing reads ``state.parts``: each reader calls one function here and gets frozen rows with exactly
the fields it needs, copied out of the reducers (no mutable reducer record crosses).
tests/contracts/test_one_way_to_read.py holds that line."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.job_identity import JobIdentity
from neurondesk.core.figures.series import StepTimeLine, chart_line
from neurondesk.core.node.compile_wall import CompileWallMemory
from neurondesk.core.node.disk import FsFigures
from neurondesk.core.node.node_health import NodeHealth
from neurondesk.core.reduce.state import RunState


@dataclass(frozen=True)
class RankRow:
    """One rank of the current attempt (core/reduce/ranks.py's RankStats, copied)."""

    pid: int
    rank: int
    steps: int
    presync_s: float | None
    step_time_s: float | None
    last_step_t: float | None
    own_s: float | None
    collective_s: float | None
    split_wait_s: float | None


def rank_rows(state: RunState) -> tuple[RankRow, ...]:
    """Every rank that reports steps, by rank."""
    return tuple(RankRow(r.pid, r.rank, r.steps, r.presync_s, r.step_time_s, r.last_step_t, r.own_s,
                         r.collective_s, r.split_wait_s) for r in state.parts.ranks.by_rank())


def rank_of_pid(state: RunState) -> dict[int, int]:
    """pid -> global rank, for the current attempt's ranks (a fresh dict each call)."""
    return {r.pid: r.rank for r in rank_rows(state)}


def straggler_count(state: RunState) -> int:
    return len(state.parts.ranks.stragglers())


def job_identity(state: RunState) -> JobIdentity:
    """Which job, node and ranks, as the journal has it (core/events/job_identity.py; a frozen struct)."""
    return state.parts.job.identity()


@dataclass(frozen=True)
class DiskView:
    filesystems: tuple[FsFigures, ...]  # each fresh from the reducer's samples
    output_lost_bytes: int  # of the workload's output, not stored (dropped, or held at the end)
    output: tuple[tuple[str, ev.OutputNotStored], ...]  # (stream, the relay's latest totals)

    def output_of(self, stream: str) -> ev.OutputNotStored | None:
        return next((e for s, e in self.output if s == stream), None)


def disk_view(state: RunState) -> DiskView:
    disk = state.parts.disk
    return DiskView(tuple(disk.filesystems()), disk.output_lost_bytes, tuple(sorted(disk.output.items())))


@dataclass(frozen=True)
class CompileWallView:
    """The compile wall's host memory now (core/node/compile_wall.py): the warning, if any, and the
    compiler processes running."""

    memory: CompileWallMemory | None
    compilers: int


def compile_wall_view(state: RunState) -> CompileWallView:
    wall = state.parts.compile_wall
    return CompileWallView(wall.figure(), wall.compilers)


@dataclass(frozen=True)
class StepTotals:
    """The lead process's running totals (every step, warm-up included)."""

    samples: int
    tokens: int


def step_totals(state: RunState) -> StepTotals:
    steps = state.parts.steps
    return StepTotals(steps.total_samples, steps.total_tokens)


def node_health(state: RunState, node: str) -> NodeHealth | None:
    return state.parts.telemetry.health.health(node)


def step_chart(state: RunState, points: int | None = None) -> StepTimeLine:
    """The step-time line the reports draw (core/figures/series.py's chart_line)."""
    return chart_line(state.parts.steps, points=points)[0]


@dataclass(frozen=True)
class Versions:
    torch: str | None  # as the lead process reported them (else the first process)
    torch_xla: str | None
    neuron_runtimes: tuple[str, ...]  # as neuron-ls lists them, sorted


def versions(state: RunState) -> Versions:
    procs = state.parts.procs
    lead = procs.processes.get(procs.lead_pid) if procs.lead_pid is not None else None
    lead = lead or next(iter(procs.processes.values()), None)
    inventory = state.parts.telemetry.inventory
    runtimes: tuple[str, ...] = ()
    if inventory is not None and inventory.neuron is not None:
        runtimes = tuple(sorted({p.runtime_version for d in inventory.neuron.devices for p in d.processes
                                 if p.runtime_version}))
    return Versions(lead.torch_version if lead else None, lead.torch_xla_version if lead else None, runtimes)


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of a restarted job (core/reduce/attempts.py's Attempt, copied)."""

    number: int
    started_t: float
    ended_t: float | None
    first_step_start: float | None
    ranks: tuple[tuple[int, int], ...]  # (global rank, pid)
    reached: int
    resumed: int | None
    failure_error: str | None
    failure_rank: int | None


@dataclass(frozen=True)
class RestartRow:
    before: AttemptRow
    after: AttemptRow
    steps_lost: int
    wasted_s: float


@dataclass(frozen=True)
class AttemptsView:
    attempts: tuple[AttemptRow, ...]  # the kept ones, in order
    restarts: int  # attempts after the first, the folded ones included
    recoveries: tuple[RestartRow, ...]  # each kept consecutive pair


def _attempt_row(a) -> AttemptRow:
    f = a.failure
    return AttemptRow(a.number, a.started_t, a.ended_t, a.first_step_start, tuple(sorted(a.ranks.items())),
                      a.reached, a.resumed, f.error if f else None, f.rank if f else None)


def attempts_view(state: RunState) -> AttemptsView:
    part = state.parts.attempts
    return AttemptsView(tuple(_attempt_row(a) for a in part.attempts), part.restarts,
                        tuple(RestartRow(_attempt_row(a), _attempt_row(b), lost.steps, lost.seconds)
                              for a, b, lost in part.restarts_lost()))


def evaluation_spans(state: RunState) -> tuple[tuple[float, float], ...]:
    """(start, end) of each evaluation the run ended."""
    return tuple((a, b) for a, b in state.parts.evaluation.spans)
