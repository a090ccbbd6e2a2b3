"""RunState on synthetic event streams: the steady rule, compile causes, quantiles."""

from __future__ import annotations

import random

from neurondesk.core import events as ev
from neurondesk.core.state import RunState, quantile


def step(i: int, d: float = 0.1, compiles: int = 0, shapes=None) -> ev.StepEnded:
    return ev.StepEnded(t=float(i), pid=1, step=i, duration_s=d, samples=8, tokens=8 * 64, compiles=compiles,
                        input_shapes=shapes)


def compile_at(i: int, point: str = "sync@train.py:10", shapes=None, trigger: str = "sync") -> ev.CompileFinished:
    return ev.CompileFinished(t=float(i), source="probe", pid=1, step=i, duration_s=2.0, point=point,
                              input_shapes=shapes, trigger=trigger, location="train.py:10")


def test_steady_steps_are_after_warmup_and_without_compiles():
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=3))
    for i in range(10):
        if i == 6:
            st.apply(compile_at(6, shapes=[[8, 64]]))
        st.apply(step(i, d=1.0 if i in (0, 6) else 0.1))
    assert st.steady_from == 3
    assert len(st.steady_times) == 6  # 3,4,5,7,8,9
    assert st.steady_samples_per_s == 8 / 0.1
    assert st.recompiles_after_warmup == 1


def test_causes_first_shape_change_new_graph_value_access():
    st = RunState()
    st.apply(compile_at(0, shapes=[[8, 64]]))
    st.apply(compile_at(1, shapes=[[8, 64]]))
    st.apply(compile_at(7, shapes=[[8, 50]]))
    st.apply(compile_at(8, point="value-access@train.py:20", trigger="value-access"))
    st.apply(compile_at(9, point="sync@other.py:3", shapes=None))
    st.apply(compile_at(10, point="sync@other.py:3", shapes=[[4, 4]]))  # unknown before: not a shape change
    causes = [(c.step, c.cause) for c in st.compiles]
    assert causes == [(0, "first"), (1, "new-graph"), (7, "shape-change"), (8, "value-access"), (9, "first"),
                      (10, "new-graph")]
    assert st.compiles[2].previous_shapes == [[8, 64]]


def test_live_quantiles_end_exact_and_match_a_full_sort():
    st = RunState()
    rnd = random.Random(7)
    for i in range(20000):
        st.apply(step(i, d=rnd.random()))
        if i % 9 == 0:
            _ = st.steady_quantile(0.5)  # what the console asks, throttled
    xs = list(st.steady_times)
    assert st.steady_quantile(0.5, exact=True) == quantile(xs, 0.5)
    assert st.steady_quantile(0.9, exact=True) == quantile(xs, 0.9)
