"""Where a run's wall time (and money) went: start-up, compile walls, steady training, evaluation,
data wait, other gaps, tear-down. The slices add up to the run's wall time by construction: the
gaps slice is what the others leave (checkpoints, logging, the host's own work between steps).

- start-up: from the launch to the start of the first training step (imports, model build, a
  setup sync, the first data);
- compile: compiles of the training phase inside the steps they stalled (evaluation's compiles
  are inside the evaluation slice);
- data wait: the steps' time waiting for the next batch;
- training: the rest of the steps' time;
- evaluation: the evaluation phases (their own time, left out of the steps);
- gaps: between the first step's start and the last step's end, what no step or evaluation took;
- tear-down: from the last step's end to the exit.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.reduce.state import RunState

SLICES = ("start-up", "compile", "training", "data wait", "evaluation", "gaps", "tear-down")


@dataclass(frozen=True)
class TimeSlice:
    name: str
    seconds: float
    share: float | None  # of the wall time
    usd: float | None


def _lead_train_compile_s(state: RunState) -> float:
    leads = {*state.parts.procs.lead_pids, state.lead_pid}  # every attempt's lead (a restart compiles again)
    return sum(c.duration_s or 0.0 for c in state.compiles
               if c.counted and c.phase != "eval" and (c.pid is None or None in leads or c.pid in leads))


def time_breakdown(state: RunState, now: float | None = None) -> list[TimeSlice]:
    wall = state.elapsed_s(now)
    steps = state.parts.steps
    seconds = dict.fromkeys(SLICES, 0.0)
    if state.started_t is None or steps.first_step_start is None or steps.last_step_end is None:
        seconds["start-up"] = wall  # no step yet: all of it is getting there
        return _priced(state, seconds, wall)
    end = state.started_t + wall
    evaluation = state.parts.evaluation
    seconds["start-up"] = min(wall, max(0.0, steps.first_step_start - state.started_t))
    seconds["tear-down"] = min(wall - seconds["start-up"], max(0.0, end - steps.last_step_end))
    # an evaluation before the first step or after the last is its own slice, not start-up or tear-down
    seconds["start-up"] -= min(seconds["start-up"], evaluation.seconds_within(state.started_t, steps.first_step_start))
    seconds["tear-down"] -= min(seconds["tear-down"], evaluation.seconds_within(steps.last_step_end, end))
    in_steps = steps.total_step_s
    compile_s = min(_lead_train_compile_s(state), steps.compiled_step_s)
    seconds["compile"] = compile_s
    seconds["data wait"] = min(steps.total_wait_s, in_steps - compile_s)
    seconds["training"] = max(0.0, in_steps - compile_s - seconds["data wait"])
    seconds["evaluation"] = evaluation.total_s
    taken = sum(seconds.values())
    seconds["gaps"] = max(0.0, wall - taken)
    if taken > wall:  # measured slices overlap a little (clocks of two processes): take it from training
        seconds["training"] = max(0.0, seconds["training"] - (taken - wall))
    return _priced(state, seconds, wall)


def _priced(state: RunState, seconds: dict[str, float], wall: float) -> list[TimeSlice]:
    price = state.price_per_hour
    return [TimeSlice(name, round(s, 3), round(s / wall, 4) if wall > 0 else None,
                      round(price * s / 3600, 6) if price is not None else None)
            for name, s in seconds.items()]
