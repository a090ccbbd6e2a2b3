"""RunView: one immutable reading of a run for one frame, built once per refresh from the reduced state
and the frame's pulse (core/view/pulse.py), shared by every widget of the frame. It holds the run's
figures (core/figures/run_figures.py's RunFigures, the one set every output reads) and every piece of
run data a view shows, copied out of the reducers, so a view renders and computes nothing.

A section whose inputs did not change since the last frame is the last frame's object (``previous``):
a panel that sees the same section object has nothing new to draw. What costs (the advice, comparing
the ranks) is done again at most every few seconds while the run goes on (compiles_view.py,
ranks_view.py)."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.phases import StepBar, recent_step_bars
from neurondesk.core.figures.run_figures import RunFigures, run_figures
from neurondesk.core.figures.series import ChartData, chart_data
from neurondesk.core.figures.time_breakdown import TimeSlice, time_breakdown
from neurondesk.core.findings.diagnostics import Diagnostic, diagnostics, input_advice
from neurondesk.core.reduce.phases import RECENT
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import script_throughput_row
from neurondesk.core.summary.types import ScriptThroughput
from neurondesk.core.view.compiles_view import CompilesView, OpenCompile, compiles_view, open_compile
from neurondesk.core.view.devices_view import DevicesView, devices_view
from neurondesk.core.view.pulse import Pulse, pulse
from neurondesk.core.view.ranks_view import RanksView, ranks_view


@dataclass(frozen=True)
class RunHeader:
    """What the run is: its command, where it runs, what it costs an hour and by whose word."""

    command: tuple[str, ...]
    device_kind: str | None
    device_name: str | None
    precision: str | None
    instance_type: str | None
    price_source: str | None
    exit_code: int | None


@dataclass(frozen=True)
class ThroughputView:
    steady_from: int | None  # the first steady step (None: not yet)
    warmup_steps: int
    script_rate: ScriptThroughput | None  # the workload's own figure beside the steady one (the summary's row)
    steps_lost: str | None
    step_bars: tuple[StepBar, ...]  # the lead's recent steps split into their phases, the latest last
    chart: ChartData  # the step-time chart's data (core/figures/series.chart_line_of draws it)
    loss: tuple[tuple[int, float], ...]  # (step, loss)
    target_loss: float | None


@dataclass(frozen=True)
class InputView:
    verdict: str  # "ok" | "warn" | "input-bound" | "unknown" (of RunFigures' data_wait_fraction)
    recent_wait_fraction: float | None  # over the last 20 steps that compiled nothing
    hint: str | None  # what to try, when the run waits for its data
    process_tree: dev.ProcessTreeSample | None


@dataclass(frozen=True)
class LogLines:
    total: int  # lines the workload printed
    lines: tuple[ev.OutputLine, ...]  # the latest ones kept


@dataclass(frozen=True)
class RunView:
    pulse: Pulse
    figures: RunFigures
    header: RunHeader
    open_compile: OpenCompile | None
    compiles: CompilesView
    ranks: RanksView
    devices: DevicesView
    throughput: ThroughputView
    inputs: InputView
    time_breakdown: tuple[TimeSlice, ...]  # where the wall time and the money went
    diagnostics: tuple[Diagnostic, ...]
    plain_step_times: tuple[float, ...]  # the recent steps that compiled nothing, seconds each
    log: LogLines
    disk_status: tuple[str, ...]  # short words for a status line: a disk that fills soon, output not stored

    @property
    def now(self) -> float:
        return self.pulse.now

    @property
    def event_count(self) -> int:
        return self.pulse.event_count

    @property
    def finished(self) -> bool:
        return self.pulse.finished


def _header(state: RunState) -> RunHeader:
    return RunHeader(tuple(state.command), state.device_kind, state.device_name, state.precision,
                     state.instance_type, state.price_source, state.exit_code)


def _throughput(state: RunState) -> ThroughputView:
    return ThroughputView(state.steady_from, state.warmup_steps, _script_rate(state), state.steps_lost_text,
                          tuple(recent_step_bars(state, RECENT)), chart_data(state.parts.steps),
                          tuple(state.loss_history), state.target_loss)


def _script_rate(state: RunState) -> ScriptThroughput | None:
    rate = state.script_throughput()
    return None if rate is None else script_throughput_row(rate)


def _inputs(state: RunState) -> InputView:
    verdict = state.input_verdict()
    hint = None
    if verdict in ("warn", "input-bound"):
        hint = input_advice(state).partition(" — ")[2] or None
    return InputView(verdict, state.recent_data_wait_fraction(), hint, state.process_tree)


def build_view(state: RunState, at: Pulse, previous: RunView | None = None) -> RunView:
    """The frame's view at ``at`` (the poll's pulse). ``previous``: the last frame's view, whose
    sections are kept where their inputs did not change (never referenced by the new view)."""
    now = at.now
    slices = tuple(time_breakdown(state, now))  # once a frame: the view's breakdown, goodput and training share
    figures = run_figures(state, now, slices=slices)
    creep = figures.memory_creep.short if figures.memory_creep is not None else None
    return RunView(
        pulse=at, figures=figures, header=_header(state), open_compile=open_compile(state, now),
        compiles=compiles_view(state, now, previous.compiles if previous is not None else None),
        ranks=ranks_view(state, now, previous.ranks if previous is not None else None),
        devices=devices_view(state, creep, previous.devices if previous is not None else None),
        throughput=_throughput(state), inputs=_inputs(state), time_breakdown=slices,
        diagnostics=tuple(diagnostics(state)),
        plain_step_times=tuple(r.duration_s for r in state.history if not r.compiled),
        log=LogLines(state.output_total, tuple(state.output)), disk_status=tuple(state.parts.disk.status_words()))


def view_of(state: RunState, now: float, previous: RunView | None = None) -> RunView:
    """The pulse and the view at ``now`` in one call (a viewer that needs no pulse of its own)."""
    return build_view(state, pulse(state, now), previous)
