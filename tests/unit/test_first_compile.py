"""'First compile' is the first training step's graph, not the first graph of any kind: Trainer and
accelerate compile small set-up graphs (0.03 s, 1.2 s) before a 16 s training graph, and
`--max-first-compile-s` must check the wall the user waits for."""

from __future__ import annotations

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.checks import Thresholds, evaluate
from neurondesk.core.summary.build import run_summary


def _state(with_training_graph: bool = True) -> RunState:
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "run_clm.py"], warmup_steps=2))
    state.apply(ev.CompileFinished(t=1.0, source="probe", pid=1, step=0, duration_s=0.03, point="setup.py:10",
                                   phase="train"))  # a set-up graph: no forward yet, no input shapes
    state.apply(ev.CompileFinished(t=2.5, source="probe", pid=1, step=0, duration_s=1.2, point="trainer.py:99",
                                   phase="train"))
    if with_training_graph:
        state.apply(ev.CompileFinished(t=19.0, source="probe", pid=1, step=0, duration_s=16.0, point="train.py:50",
                                       input_shapes=[[8, 64]], phase="train"))
    for step in range(4):
        state.apply(ev.StepEnded(t=20.0 + step, pid=1, step=step, duration_s=1.0, samples=8))
    return state


def test_first_compile_is_the_first_training_graph_and_the_check_reads_it():
    s = run_summary(_state(), now=30.0)
    assert s.first_compile_s == 16.0
    assert s.compile_count == 3  # the set-up graphs are still compiles, listed and costed
    failed = evaluate(s, Thresholds(max_first_compile_s=10.0))
    assert any("first compile took 16.0 s" in f for f in failed)


def test_without_a_training_graph_the_first_compile_is_the_first_that_succeeded():
    assert run_summary(_state(with_training_graph=False), now=30.0).as_dict()["first_compile_s"] == 0.03

