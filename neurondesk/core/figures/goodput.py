"""Goodput: of the job's wall time (and money), the share that moved the model forward, and where the rest
went (badput, by kind). One computation with the time breakdown (core/figures/time_breakdown.py): its
slices are split further, never measured twice, so productive time and the badput add up to the wall time.

- startup: the launch to the first step (the start-up slice; a restart's own start-up is restart_recovery);
- compile: the compile slice (the first attempt's and every restart's);
- data_wait: the data wait slice;
- checkpoint_save / checkpoint_load: the seconds the checkpoint reducer measured (inputs), taken from the
  time between steps (saves) and from the recovery, the start-up and the time between steps (loads);
- wasted_progress: the steps a restart ran again (the failed attempt reached them, the next one resumed
  below them), at the failed attempt's mean step time, taken from the training slice;
- restart_recovery: from each failure to the next attempt's first step, less the checkpoint loads in it;
- evaluation: the evaluation slice;
- other: what is left between steps (logging, host work, the failing step) and the tear-down.

docs/goodput.md says it in full, and what differs from ML Goodput Measurement's kinds.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from neurondesk.core.figures.time_breakdown import TimeSlice, time_breakdown
from neurondesk.core.reduce.state import RunState

KINDS = ("startup", "compile", "data_wait", "checkpoint_save", "checkpoint_load", "wasted_progress",
         "restart_recovery", "evaluation", "other")
DISRUPTIONS_KEPT = 20  # the summary lists the last ones; disruptions_total counts all
TRACEBACK_LINES = 12


class GoodputInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What goodput takes from outside the time breakdown."""

    # job seconds spent saving / loading checkpoints, all attempts: the checkpoint reducer's save_s and
    # load_s (core/reduce/checkpoints.py, issue 46 item 3), read by goodput_inputs
    checkpoint_save_s: float = 0.0
    checkpoint_load_s: float = 0.0


class Disruption(msgspec.Struct, frozen=True, kw_only=True):
    """A failure the job restarted from (or died of, the last one): its cause and what it cost."""

    attempt: int  # the attempt that failed
    t: float | None  # when (the first failure of that attempt, else its last step's end)
    at_s: float | None = None  # the same, seconds from the run's start (its place on the run's time line)
    rank: int | None
    pid: int | None
    step: int | None  # the job step it reached
    cause: str  # "RuntimeError: ...", "exit code 7 (torchrun: exitcode 7)", "" when nothing said why
    traceback: list[str] = []
    steps_lost: int | None = None  # run again by the next attempt (None: no attempt came after it)
    wasted_s: float | None = None
    recovery_s: float | None = None  # from the failure to the next attempt's first step
    problem: str | None = None  # a resumed step that makes no sense, in words


class Goodput(msgspec.Struct, frozen=True, kw_only=True):
    fraction: float | None  # productive training time / wall time
    productive_s: float
    productive_usd: float | None
    wall_s: float
    restarts: int
    steps_lost: int  # steps run twice, all restarts
    max_step: int  # the largest step the job reached
    first_step: int = 0  # where this run's first attempt began (a relaunch resumed there: core/job/job_goodput.py)
    badput: dict[str, float]  # seconds by kind (KINDS)
    badput_usd: dict[str, float] = {}  # by kind, where the price is known
    ended: str = "running"  # "running" | "finished" | "finished after N restarts" | "died" | "died after N restarts"
    disruptions: list[Disruption] = []  # the last DISRUPTIONS_KEPT
    disruptions_total: int = 0
    resume_known: bool = True  # every restart said where it resumed (else: taken as a start over)
    recompile: str | None = None  # "a restart recompiled 42 graphs for 6 min: ..." (advice)
    problems: list[str] = []

    def words(self) -> str:
        """One line for the console and the status line."""
        share = f"{self.fraction:.0%}" if self.fraction is not None else "—"
        top = sorted(((s, k) for k, s in self.badput.items() if s > 0), reverse=True)[:3]
        where = ", ".join(f"{k.replace('_', ' ')} {s:.1f} s" for s, k in top)
        restarts = ""
        if self.restarts:
            restarts = (f"; {self.restarts} restart{'s' if self.restarts != 1 else ''}, "
                        f"{self.steps_lost:,} step{'s' if self.steps_lost != 1 else ''} lost")
        return f"goodput {share}" + (f" (badput: {where})" if where else "") + restarts


def _take(amount: float, pools: dict[str, float], order: tuple[str, ...]) -> float:
    """Take up to ``amount`` seconds out of ``pools`` in ``order``; what was taken."""
    taken = 0.0
    for name in order:
        part = min(pools[name], amount - taken)
        if part > 0:
            pools[name] -= part
            taken += part
    return taken


def goodput_inputs(state: RunState) -> GoodputInputs:
    """The inputs from the state: the job's checkpoint seconds from the checkpoint reducer (wall time, a
    save on several ranks at once counted once; the probe leaves them out of the steps they fall in)."""
    ck = state.parts.checkpoints
    return GoodputInputs(checkpoint_save_s=ck.save_s, checkpoint_load_s=ck.load_s)


def goodput(state: RunState, now: float | None = None, inputs: GoodputInputs | None = None,
            slices: Sequence[TimeSlice] | None = None) -> Goodput:
    """``slices``: the time breakdown at ``now`` where the caller has it (run_figures): computed once."""
    inputs = inputs or goodput_inputs(state)
    if slices is None:
        slices = time_breakdown(state, now)
    pools = {s.name: s.seconds for s in slices}
    wall = state.elapsed_s(now)
    attempts = state.parts.attempts
    pairs = attempts.restarts_lost()
    folded = attempts.folded
    pools["recovery"] = 0.0
    bad = dict.fromkeys(KINDS, 0.0)
    bad["wasted_progress"] = _take(sum(lost.seconds for _, _, lost in pairs) + folded.wasted_s, pools,
                                   ("training",))
    recovery = sum(lost.recovery_s for _, _, lost in pairs) + folded.recovery_s
    pools["recovery"] = _take(recovery, pools, ("gaps",))  # the restart's window is between two steps
    bad["checkpoint_load"] = _take(inputs.checkpoint_load_s, pools, ("recovery", "start-up", "gaps"))
    bad["checkpoint_save"] = _take(inputs.checkpoint_save_s, pools, ("gaps", "tear-down", "training"))
    bad["restart_recovery"] = pools["recovery"]
    bad["startup"] = pools["start-up"]
    bad["compile"] = pools["compile"]
    bad["data_wait"] = pools["data wait"]
    bad["evaluation"] = pools["evaluation"]
    bad["other"] = pools["gaps"] + pools["tear-down"]
    productive = pools["training"]
    price = state.price_per_hour
    usd = (lambda s: round(price * s / 3600, 6)) if price is not None else None
    disruptions = _disruptions(state)
    resume_known = all(b.resumed is not None for _, b, _ in pairs)
    steps_lost = sum(lost.steps for _, _, lost in pairs) + folded.steps_lost
    return Goodput(
        fraction=round(productive / wall, 4) if wall > 0 else None,
        productive_s=round(productive, 3), productive_usd=usd(productive) if usd else None, wall_s=round(wall, 3),
        restarts=attempts.restarts, steps_lost=steps_lost, max_step=attempts.max_step,
        first_step=attempts.max_step - attempts.job_steps,
        badput={k: round(v, 3) for k, v in bad.items()},
        badput_usd={k: usd(v) for k, v in bad.items()} if usd else {},
        ended=_ended(state, attempts.restarts), disruptions=disruptions[-DISRUPTIONS_KEPT:],
        disruptions_total=len(disruptions) + folded.attempts, resume_known=resume_known,
        recompile=recompile_words(state),
        problems=[*attempts.problems, *(lost.problem for _, _, lost in pairs if lost.problem)][:8],
    )


def _ended(state: RunState, restarts: int) -> str:
    after = f" after {restarts} restart{'s' if restarts != 1 else ''}" if restarts else ""
    if not state.finished:
        return "running"
    died = (state.exit_code not in (0, None) or state.exit_signal
            or state.parts.ranks.failed_first is not None)
    return ("died" if died else "finished") + after


def _disruptions(state: RunState) -> list[Disruption]:
    """Every kept attempt that failed: those a restart followed, then the last one if it died."""
    attempts = state.parts.attempts
    kept = attempts.attempts
    lost = {a.number: x for a, _, x in attempts.restarts_lost()}
    out, t0 = [], state.started_t
    for a in kept:
        f = a.failure
        x = lost.get(a.number)
        if f is None and x is None:
            continue
        out.append(Disruption(
            attempt=a.number, t=(t := f.t if f else a.ended_t),
            at_s=round(t - t0, 3) if t is not None and t0 is not None else None, rank=f.rank if f else None, pid=f.pid if f else None,
            step=a.reached, cause=f.error if f else "", traceback=list(f.traceback[-TRACEBACK_LINES:]) if f else [],
            steps_lost=x.steps if x else None, wasted_s=round(x.seconds, 3) if x else None,
            recovery_s=round(x.recovery_s, 3) if x else None, problem=x.problem if x else None))
    return out


def recompile_words(state: RunState) -> str | None:
    """A restart that compiled again what an earlier attempt had compiled: the cache was not shared."""
    attempts = state.parts.attempts
    if not attempts.restarts:
        return None
    first = attempts.attempts[0].number
    seen: set[str] = set()
    again, seconds, neff = 0, 0.0, False
    for c in state.compiles:
        if not c.counted or c.phase == "eval":
            continue
        later = attempts.attempt_of(c.pid) > first
        if not later:
            if c.graph_hash:
                seen.add(c.graph_hash)
            continue
        if c.graph_hash and seen and c.graph_hash not in seen:
            continue  # a new graph, not a recompile
        if c.cache == "hit":
            continue
        again += 1
        seconds += c.duration_s or 0.0
        neff = neff or c.source == "neuron-log"
    if not again:
        return None
    what = "NEFF" if neff else "graph"
    took = f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.1f} s"
    return (f"a restart recompiled {again} {what}{'s' if again != 1 else ''} for {took}: the compile cache was not "
            "shared between attempts/nodes (put the persistent cache on a disk every attempt and node sees: "
            "NEURON_COMPILE_CACHE_URL, or torch_xla.runtime.initialize_cache)")
