"""What a sink is fed: frames of the run's figures, taken by the thread that owns the state. Pure.

A ``Frame`` is immutable and holds core's ``RunFigures`` (core/figures/run_figures.py, read, never recomputed)
plus what the run has seen at that moment (the last loss, a compile in progress, the compiles ended
since the previous frame). ``FrameTaker.take()`` is called by the state's thread between two
``apply()``s (the recorder's loop, or an export's replay); the sink's thread only reads frames.

Every sink writes the same scalars (``scalars()``) under the same names, ``neurondesk/<key>``: the
rows of core's names table (core/figures/metric_names.py) marked ``sink``, a figure by its
RunFigures field, the rest from the frame (``Frame.quantities``).
"""

from __future__ import annotations

import math

import msgspec

from neurondesk.core.figures.metric_names import SINK_PREFIX, SINK_SCALARS
from neurondesk.core.figures.run_figures import RunFigures, run_figures
from neurondesk.core.reduce.state import RunState
from neurondesk.core.view.read_views import job_identity
from neurondesk.core.view.read_views import versions as software_versions
from neurondesk.sinks.redact import argv_secrets, redact_argv

PREFIX = SINK_PREFIX
# (scalar name, RunFigures field) of the figures every sink writes
FIGURE_SCALARS = tuple((name.key, name.key) for name in SINK_SCALARS if name.figure)


class CompileRow(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    t: float
    step: int | None
    cause: str
    duration_s: float | None
    location: str | None
    reason: str | None
    source: str
    status: str
    recompile: bool

    def text(self) -> str:
        """One line of Markdown (TensorBoard's text tab renders it)."""
        took = "still compiling" if self.duration_s is None else f"{self.duration_s:.2f} s"
        where = f" at `{self.location}`" if self.location else ""
        why = f" ({self.reason})" if self.reason else ""
        again = ", a recompile" if self.recompile else ""
        return f"compile #{self.index} at step {self.step}: **{self.cause}**{why}{where}, {took}{again} [{self.status}]"


class Frame(msgspec.Struct, frozen=True, kw_only=True):
    t: float  # the state's clock (wall time of the run)
    step: int  # steps the job has done: every sink's x axis
    figures: RunFigures
    loss: float | None  # the last loss the run reported
    compiling: bool  # a compile is in progress
    last_step_s: float | None  # the last step's own duration, as recorded
    compiles: tuple[CompileRow, ...] = ()  # ended since the previous frame

    def quantities(self) -> dict[str, float | None]:
        """What is not a figure, by its key in core's names table (core/figures/metric_names.py)."""
        return {"loss": self.loss, "last_step_time_s": self.last_step_s,
                "compile_in_progress": 1.0 if self.compiling else 0.0}


class RunInfo(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    params: dict[str, str]  # how it was run: the command, instance type, price, warm-up ...
    tags: dict[str, str]  # what it is: job, node, device, versions (may grow as the run goes)
    hidden: tuple[str, ...] = ()  # the command line's secret values (redact.argv_secrets): never sent (base.scrub_info)


class RunEnd(msgspec.Struct, frozen=True, kw_only=True):
    frame: Frame  # the last figures: the summary's
    info: RunInfo
    exit_code: int | None
    compiles: tuple[CompileRow, ...]  # all of them
    artifacts: dict[str, str] = {}  # file name -> text: summary.json, summary.md, report.html


def _finite(value) -> bool:
    return value is not None and not isinstance(value, bool) and math.isfinite(value)


def scalars(frame: Frame) -> dict[str, float]:
    """The frame's scalars by their full name; a figure that is unknown (None) is left out."""
    own = frame.quantities()
    out = {}
    for name in SINK_SCALARS:
        value = getattr(frame.figures, name.key) if name.figure else own[name.key]
        if _finite(value):
            out[PREFIX + name.key] = float(value)
    return out


def compile_row(c) -> CompileRow:
    return CompileRow(index=c.index, t=c.t, step=c.step, cause=c.cause or "", duration_s=c.duration_s,
                      location=c.location, reason=c.reason, source=c.source or "", status=c.status,
                      recompile=c.recompile)


class FrameTaker:
    """Owned by the state's thread; remembers which compiles the previous frame carried."""

    def __init__(self) -> None:
        self._compiles_seen = 0
        self._last_t = -math.inf  # the latest frame's time

    def take(self, state: RunState, now: float, end: bool = False, figures: RunFigures | None = None) -> Frame:
        """``end``: the figures as summary.json has them (the run's own clock, not ``now``; ``figures``: the
        summary's own, when the caller has it). The end
        frame is stamped after every frame before it (the run's last event may be older than the
        last periodic frame): a sink's latest value (MLflow's, by timestamp at the last step) is the summary's."""
        if end and now <= self._last_t:
            now = self._last_t + 0.001  # MLflow keeps milliseconds
        self._last_t = max(self._last_t, now)
        compiles = state.compiles
        new = tuple(compile_row(c) for c in compiles[self._compiles_seen:])
        self._compiles_seen = len(compiles)
        history = state.history
        if figures is None:
            figures = run_figures(state, None if end else now)
        return Frame(t=now, step=state.steps_done, figures=figures, loss=state.loss_last,
                     compiling=state.open_compile_since() is not None,
                     last_step_s=history[-1].duration_s if history else None, compiles=new)

    def end(self, state: RunState, now: float, artifacts: dict[str, str] | None = None,
            figures: RunFigures | None = None) -> RunEnd:
        """``figures``: the summary's (the recorder built it once at the end); None: computed here."""
        return RunEnd(frame=self.take(state, now, end=True, figures=figures), info=run_info(state), exit_code=state.exit_code,
                      compiles=tuple(compile_row(c) for c in state.compiles), artifacts=artifacts or {})


def run_info(state: RunState) -> RunInfo:
    """Params from what the run was started with; tags from what it is (as far as seen yet)."""
    params = {"command": " ".join(redact_argv(state.command)), "instance_type": state.instance_type,
              "price_per_hour": state.price_per_hour, "price_source": state.price_source,
              "warmup_steps": state.warmup_steps, "steps_requested": state.steps_requested,
              "target_loss": state.target_loss, "budget_usd": state.budget_usd,
              **{f"config.{k}": v for k, v in sorted(state.config.items())}}
    job = job_identity(state)
    tags = {"neurondesk.run_id": state.run_id, "job": job.job_id, "node": job.node, "node_rank": job.node_rank,
            "nodes": job.nodes, "world_size": job.world_size, "launcher": job.launcher,
            "instance_type": state.instance_type, "device": state.device_kind, "device_name": state.device_name,
            "precision": state.precision or state.config.get("precision"), **versions(state)}
    return RunInfo(run_id=state.run_id or "", params=_texts(params), tags=_texts(tags),
                   hidden=argv_secrets(state.command))


def versions(state: RunState) -> dict[str, str]:
    """torch / torch-xla as the lead process reported them; the Neuron runtime's as neuron-ls lists it."""
    v = software_versions(state)
    out = {"torch_version": v.torch, "torch_xla_version": v.torch_xla, "neuron_runtime_version": ",".join(v.neuron_runtimes)}
    return {k: text for k, text in out.items() if text}


def _texts(d: dict) -> dict[str, str]:
    """None and '' left out; every value as text, at most 500 characters (MLflow's limit for a param)."""
    return {k: str(v)[:500] for k, v in d.items() if v is not None and v != ""}


FRAME_EVERY_S = 1.0  # a frame a second of the run's time, live and replayed alike


def replayed_frames(events, state: RunState, taker: FrameTaker, every_s: float = FRAME_EVERY_S):
    """Reduce ``events`` (a recorded journal) into ``state``, yielding a frame whenever the run's clock
    passed ``every_s`` since the last one: the frames a live recorder would have taken."""
    next_t = None
    for e in events:
        state.apply(e)
        if next_t is None:
            next_t = e.t + every_s
        elif e.t >= next_t:
            next_t = e.t + every_s
            yield taker.take(state, e.t)
