"""The recompile storm is named whatever the order of a step's compiles: nanoGPT on XLA through a
launcher (no mark_step anywhere) compiles the previous step's graph again first and then a larger
one (graph inputs 32 -> 37 -> 42 -> 47 over steps 0-3); the growth tracker used to reset on the
first of the two."""

from __future__ import annotations

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.checks import Thresholds, evaluate
from neurondesk.core.summary.build import run_summary


def _storm(previous_first: bool, steps: int = 4) -> RunState:
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "train.py"], warmup_steps=1))
    t = 1.0
    for step in range(steps):
        sizes = [32 + 5 * (step - 1), 32 + 5 * step] if previous_first and step else [32 + 5 * step]
        for n in sizes:
            t += 0.5
            state.apply(ev.CompileFinished(t=t, source="probe", pid=1, step=step, duration_s=0.4,
                                           point="train.py:88", input_shapes=[[4, 64]], graph_inputs=n,
                                           phase="train"))
        t += 0.1
        state.apply(ev.StepEnded(t=t, pid=1, step=step, duration_s=0.6, samples=4))
    return state


@pytest.mark.parametrize("previous_first", [False, True])
def test_the_storm_is_named_whatever_the_order_of_a_steps_compiles(previous_first):
    state = _storm(previous_first)
    s = run_summary(state, now=20.0)
    grows = [d for d in s.diagnostics if d.kind == "graph-grows"]
    assert len(grows) == 1 and "32 → 37 → 42 → 47 over steps 0–3" in grows[0].message
    assert state.parts.compiles.graph_grows
    assert any("the graph grows every step" in f for f in evaluate(s, Thresholds()))  # --check fails it


def test_a_step_that_compiles_a_smaller_graph_ends_the_storm():
    state = _storm(False, steps=3)
    state.apply(ev.CompileFinished(t=30.0, source="probe", pid=1, step=3, duration_s=0.4, point="train.py:88",
                                   input_shapes=[[4, 64]], graph_inputs=20, phase="train"))
    state.apply(ev.StepEnded(t=31.0, pid=1, step=3, duration_s=0.6, samples=4))
    assert not state.parts.compiles.graph_grows
    assert len(state.parts.compiles.longest_growth) == 3  # the storm that was is still named
