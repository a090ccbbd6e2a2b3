"""The hang rule reads a typed Progress (core/node/hang.py), built by RunState.progress() from the reducers:
node reads no reducer. A run with steps and nothing else (no compile, no evaluation) is judged from its
last step alone."""

from __future__ import annotations

from neurondesk.core.events import run_events as ev
from neurondesk.core.node.hang import HANG_MIN_S, Progress, detect_hang, last_progress_t
from neurondesk.core.reduce.state import RunState

T0 = 1_790_000_000.0


def test_a_run_with_only_steps_is_judged_from_its_last_step():
    p = Progress(finished=False, compiling=False, last_step_end=T0, other_marks=(), steady_step_time_s=None,
                 hang_after_s=None, steps_done=3)
    assert last_progress_t(p) == T0
    assert detect_hang(p, T0 + HANG_MIN_S - 1) is None
    assert detect_hang(p, T0 + HANG_MIN_S + 1).words() == "hung at step 3 for 5 min"


def test_progress_is_read_from_the_state_and_the_latest_mark_wins():
    state = RunState()
    state.apply(ev.RunStarted(t=T0, run_id="r", command=["python", "train.py"]))
    assert state.progress().last_step_end is None and detect_hang(state.progress(), T0 + 3600) is None
    state.apply(ev.StepEnded(t=T0 + 10, pid=7, step=0, duration_s=1.0))
    p = state.progress()
    assert p.last_step_end == T0 + 10 and p.other_marks == () and p.steps_done == 1 and not p.finished
    assert detect_hang(p, T0 + 10 + HANG_MIN_S + 1) is not None
