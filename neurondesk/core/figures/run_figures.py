"""The run's figures: computed once, here, from the reduced state and a clock reading. Pure.

Every output (the console's panels, the headless status line, summary.json / .md, compare and
history through the summary, the Prometheus exporter, the sinks) reads a ``RunFigures``; none
computes a figure of its own. Adding a figure: a field of ``RunFigures``, its line in
``run_figures`` and a ``FigureInfo`` in ``FIGURES`` (then scripts/make_schemas.py);
summary.json (``figures``), summary.md / text / csv and compare (``report``), a console panel
(``panel``) and the headless status line (``status``) pick it up from ``FIGURES``; its Prometheus
series and sink scalar, from its row in ``METRIC_NAMES`` (core/figures/metric_names.py).

Unknown figures are None, never a made-up number. With many ranks the job goes at its slowest
rank's pace: its step time is the slowest rank's steady median, and every price per step uses it.
"""

from __future__ import annotations

import math

import msgspec

from neurondesk.core.figures.budget import BudgetFigures, budget_figures
from neurondesk.core.figures.checkpoint_figures import checkpoint_figures
from neurondesk.core.figures.cost import cost_figures, cost_so_far
from neurondesk.core.figures.goodput import Goodput, goodput
from neurondesk.core.figures.mfu import mfu_for_state
from neurondesk.core.figures.phases import StepPhases, step_phases_by_rank
from neurondesk.core.figures.time_breakdown import TimeSlice, time_breakdown
from neurondesk.core.findings.checkpoint_advice import CheckpointAdvice
from neurondesk.core.findings.crash import Crash, crash_of
from neurondesk.core.findings.memory_creep import MemoryCreep, memory_creep
from neurondesk.core.node.prices import PriceTable
from neurondesk.core.reduce.compile.compiles import seconds_unknown
from neurondesk.core.reduce.state import RunState


class RunFigures(msgspec.Struct, frozen=True, kw_only=True):
    """The figures of a run at one moment (``at_t``: the clock reading they were computed at)."""

    at_t: float | None
    elapsed_s: float
    steps: int  # steps the whole job has done
    steps_requested: int | None
    steady_steps: int
    step_time_s: float | None  # the job's steady step time (the mean steady step; the slowest rank's with many)
    step_time_p90_s: float | None  # the lead process's steady p90
    samples_per_s: float | None  # steady, summed over the ranks
    tokens_per_s: float | None
    steps_per_hour: float | None  # at the job's steady step time
    data_wait_fraction: float | None
    compile_count: int
    compile_total_s: float | None  # None: compiles counted whose seconds no source gave (a NEFF cache log)
    first_compile_s: float | None
    recompiles_after_warmup: int
    compile_share: float | None  # of the wall time, capped at 1
    compile_share_of_cost: float | None  # the same share of the bill; None for a run with no price
    price_per_hour: float | None
    total_usd: float | None  # cost so far: the whole wall time
    per_1k_steps_steady_usd: float | None
    per_1k_steps_all_in_usd: float | None
    per_million_tokens_usd: float | None
    projected_usd: float | None  # for the requested steps, at the steady pace
    to_target_usd: float | None  # what reaching the target loss cost
    mfu: float | None
    hfu: float | None
    mfu_note: str | None
    model_flops_per_s: float | None
    hardware_flops_per_s: float | None
    peak_flops_per_s: float | None
    budget: BudgetFigures | None = None  # --budget-usd: spent, share, when it is reached
    step_phases: StepPhases | None = None  # the steady step split into its phases, with a verdict (core/figures/phases.py)
    step_phases_by_rank: list[StepPhases] = []  # every rank's (one row with one rank)
    crash: Crash | None = None  # how the run died, when it did: kind, finding, what to try (core/findings/crash.py)
    memory_creep: MemoryCreep | None = None  # memory that creeps over the steady steps (core/findings/memory_creep.py); None: none
    ttfi_s: float | None = None  # time to first step (TTFI): from the launch to the end of the first training step
    ttfi_cache: str | None = None  # "cold": something compiled before it ended; "warm": a persistent cache served it
    goodput: Goodput | None = None  # productive time / wall, badput by kind, restarts, steps lost (core/figures/goodput.py)
    # of the wall time, the steps' own work (no compile, no data wait): the time breakdown's "training"
    # slice (core/figures/time_breakdown.py), what the rest of the bill bought; None before a step ended
    training_share: float | None = None
    # checkpoints (core/figures/checkpoint_figures.py): job seconds (a save on several ranks at once counts once)
    checkpoint_saves: int = 0
    checkpoint_save_s: float = 0.0  # blocking time of every save, failed ones too
    checkpoint_load_s: float = 0.0
    checkpoint_wait_s: float = 0.0  # the other ranks' wait for the saves: each checkpoint's longest, summed
    checkpoint_bytes: int = 0  # on disk after the saves that were given a path (every rank's own files)
    checkpoint_write_rate: float | None = None  # bytes a job second of those saves
    checkpoint_failed: int = 0  # saves and loads that raised (the user's own error, unchanged)
    checkpoint_last_step: int | None = None  # the last good checkpoint: the probe's step when it was made
    checkpoint_last_t: float | None = None  # ... and when it was written
    checkpoint_last: str | None = None  # "step 100, 2 min ago"
    checkpoints: str | None = None  # "3 saves, 2.10 s, 45.0 MiB at 21.0 MiB/s; the other ranks waited 1.9 s; 1 load, 0.40 s"
    checkpoint_interval_s: float | None = None  # the mean time from one save's start to the next
    checkpoint_advice: CheckpointAdvice | None = None  # Young/Daly's interval beside the run's (core/findings/checkpoint_advice.py)


class FigureInfo(msgspec.Struct, frozen=True):
    """How outputs that list figures generically label and format one (its names outside:
    core/figures/metric_names.py)."""

    name: str  # the RunFigures field
    label: str
    kind: str  # how reports format it (reports/fmt.value_text): "ms", "s", "rate", "usd", "pct", "int"
    report: bool = False  # listed by summary.md / text / csv and compare from this table (older
    # figures have rows of their own there)
    better: str | None = None  # "lower" | "higher": compare marks the best run
    panel: str | None = None  # the console panel that lists it after its own rows ("throughput")
    status: bool = False  # on the headless status line, after the steady rate
    quiet: bool = False  # listed by reports and panels only when known and not zero (a run with no checkpoint)


FIGURES: tuple[FigureInfo, ...] = (
    FigureInfo("step_time_s", "steady step time", "ms"),
    FigureInfo("step_time_p90_s", "steady step time p90", "ms"),
    FigureInfo("samples_per_s", "steady samples/s", "rate"),
    FigureInfo("tokens_per_s", "steady tokens/s", "rate"),
    FigureInfo("steps_per_hour", "steps/hour", "rate", report=True, better="higher", panel="throughput", status=True),
    FigureInfo("data_wait_fraction", "data wait", "pct"),
    FigureInfo("compile_share", "compile share of the wall time", "pct"),
    FigureInfo("compile_share_of_cost", "compile share of the cost", "pct"),
    FigureInfo("total_usd", "cost so far", "usd"),
    FigureInfo("per_1k_steps_steady_usd", "$ / 1k steps steady", "usd"),
    FigureInfo("per_1k_steps_all_in_usd", "$ / 1k steps all-in", "usd"),
    FigureInfo("per_million_tokens_usd", "$ / 1M tokens", "usd"),
    FigureInfo("projected_usd", "projected", "usd"),
    FigureInfo("mfu", "MFU", "pct"),
    FigureInfo("hfu", "HFU", "pct"),
    FigureInfo("model_flops_per_s", "model FLOP/s", "rate"),
    FigureInfo("peak_flops_per_s", "peak FLOP/s", "rate"),
    FigureInfo("ttfi_s", "time to first step", "s", report=True, better="lower", panel="throughput", status=True),
    FigureInfo("ttfi_cache", "first step's compile cache", "text", report=True, panel="throughput"),
    FigureInfo("training_share", "training share", "pct", report=True, better="higher", panel="throughput",
               status=True),
    FigureInfo("checkpoints", "checkpoints", "text", report=True, panel="throughput", quiet=True),
    FigureInfo("checkpoint_last", "last checkpoint", "text", report=True, panel="throughput", quiet=True),
    FigureInfo("checkpoint_save_s", "checkpoint save time", "s", report=True, better="lower", quiet=True),
    FigureInfo("checkpoint_load_s", "checkpoint load time", "s", report=True, better="lower", quiet=True),
    FigureInfo("checkpoint_wait_s", "other ranks' wait for checkpoints", "s", report=True, better="lower", quiet=True),
    FigureInfo("checkpoint_bytes", "checkpoint bytes written", "bytes", report=True, quiet=True),
    FigureInfo("checkpoint_write_rate", "checkpoint write rate", "bytes_s", report=True, better="higher", quiet=True),
    FigureInfo("checkpoint_failed", "failed checkpoint saves/loads", "int", report=True, better="lower", quiet=True),
)


def rate_text(x: float) -> str:
    """How every output writes a figure of kind "rate": with the precision its size carries, three
    significant digits and no digit of the whole part dropped. 38,981.7 -> '38,982'; 191.94 -> '192';
    29.84 -> '29.8'; 3.402 -> '3.40'; 0.01234 -> '0.0123'."""
    size = abs(x)
    nd = 0 if size >= 100 or size == 0 else min(6, 2 - math.floor(math.log10(size)))
    if nd and round(size, nd) >= 10 ** (3 - nd):  # 99.96 rounds up a digit: '100', not '100.0'
        nd -= 1
    return f"{x:,.{nd}f}"


def job_step_time_s(state: RunState) -> float | None:
    """The job's steady step time on the one basis (core/reduce/steps.py): the mean steady step, the
    slowest rank's with many ranks, else the lead's."""
    return state.steady_step_time_s


def run_figures(state: RunState, now: float | None = None, peaks: PriceTable | None = None,
                slices: tuple[TimeSlice, ...] | None = None) -> RunFigures:
    """``now``: the clock reading (None: the last recorded event's time). ``peaks``: the table whose
    chip rows give MFU's peak FLOPS (default: the bundled one). ``slices``: the time breakdown at ``now``
    where the caller has it already (a frame's view, a summary): it is computed once, and goodput and
    the training share read it."""
    if slices is None:
        slices = tuple(time_breakdown(state, now))
    elapsed = state.elapsed_s(now)
    step_time = job_step_time_s(state)
    price = state.price_per_hour
    compile_s = None if seconds_unknown(state.parts.compiles.compiles) else state.compile_total_s
    cost = cost_figures(price, elapsed, state.steps_done, step_time, state.steady_tokens_per_s,
                        compile_s, state.steps_requested)
    util = mfu_for_state(state, peaks)
    phases = step_phases_by_rank(state)
    ck = checkpoint_figures(state.parts.checkpoints, elapsed, now if now is not None else state.last_t,
                            state.parts.attempts.restarts)
    return RunFigures(
        at_t=now,
        elapsed_s=elapsed,
        steps=state.steps_done,
        steps_requested=state.steps_requested,
        steady_steps=len(state.steady_times),
        step_time_s=step_time,
        step_time_p90_s=state.steady_quantile(0.9, exact=True),
        samples_per_s=state.steady_samples_per_s,
        tokens_per_s=state.steady_tokens_per_s,
        steps_per_hour=3600.0 / step_time if step_time else None,
        data_wait_fraction=state.data_wait_fraction,
        compile_count=state.parts.compiles.compile_count,  # a graph_stats row another compile holds: listed only
        compile_total_s=compile_s,
        first_compile_s=state.first_compile_s,
        recompiles_after_warmup=state.recompiles_after_warmup,
        compile_share=cost.compile_share,
        compile_share_of_cost=cost.compile_share_of_cost,
        price_per_hour=price,
        total_usd=cost.total_usd,
        per_1k_steps_steady_usd=cost.per_1k_steps_steady_usd,
        per_1k_steps_all_in_usd=cost.per_1k_steps_all_in_usd,
        per_million_tokens_usd=cost.per_million_tokens_usd,
        projected_usd=cost.projected_usd,
        to_target_usd=cost_so_far(price, state.time_to_target_s),
        mfu=util.mfu,
        hfu=util.hfu,
        mfu_note=util.note,
        model_flops_per_s=util.model_flops_per_s,
        hardware_flops_per_s=util.hardware_flops_per_s,
        peak_flops_per_s=util.peak_flops_per_s,
        budget=_budget(state, elapsed, step_time),
        step_phases=max(phases, key=lambda p: p.step_s) if phases else None,
        step_phases_by_rank=phases,
        crash=crash_of(state),
        memory_creep=memory_creep(state),
        ttfi_s=_ttfi_s(state),
        ttfi_cache=state.parts.neff.first_step_cache(state.lead_pid),
        goodput=goodput(state, now, slices=slices),
        training_share=_training_share(state, slices),
        checkpoint_saves=ck.saves,
        checkpoint_save_s=ck.save_s or 0.0,
        checkpoint_load_s=ck.load_s or 0.0,
        checkpoint_wait_s=ck.wait_s,
        checkpoint_bytes=ck.bytes or 0,
        checkpoint_write_rate=ck.write_rate,
        checkpoint_failed=ck.failed,
        checkpoint_last_step=ck.last_step,
        checkpoint_last_t=ck.last_t,
        checkpoint_last=ck.last,
        checkpoints=ck.words,
        checkpoint_interval_s=ck.interval_s,
        checkpoint_advice=ck.advice,
    )


def _training_share(state: RunState, slices: tuple[TimeSlice, ...]) -> float | None:
    if not state.steps_done:
        return None
    return next(x.share for x in slices if x.name == "training")


def _ttfi_s(state: RunState) -> float | None:
    """From the launch to the end of the lead's first training step (None: no step yet)."""
    end = state.parts.steps.first_step_end
    if end is None or state.started_t is None:
        return None
    return round(max(0.0, end - state.started_t), 6)


def _budget(state: RunState, elapsed: float, step_time: float | None) -> BudgetFigures | None:
    budget = state.parts.run.budget_usd
    if budget is None:
        return None
    return budget_figures(budget, state.price_per_hour, elapsed, state.steps_done, step_time, state.finished)


def budget_for_state(state: RunState, now: float | None = None) -> BudgetFigures | None:
    """The run's budget figures at ``now`` (run_figures' ``budget``), or None without --budget-usd."""
    return _budget(state, state.elapsed_s(now), job_step_time_s(state))
