"""The time breakdown is computed once a frame and once a summary (issue 51 item 3): the view's breakdown,
goodput's pools and the training share read the same slices (they were three computations each), and
the figures they give are the ones computed from a fresh breakdown."""

from __future__ import annotations

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.figures import goodput as goodput_mod
from neurondesk.core.figures import run_figures as run_figures_mod
from neurondesk.core.figures import time_breakdown as tb
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary import build as build_mod
from neurondesk.core.view import run_view as run_view_mod

T0 = 1_790_000_000.0


def a_run() -> RunState:
    st = RunState()
    st.apply(ev.RunStarted(t=T0, run_id="once", command=["train.py"], price_per_hour=10.0, warmup_steps=2))
    st.apply(ev.ProcessAttached(t=T0 + 0.1, pid=7, ppid=1))
    st.apply(ev.CompileStarted(t=T0 + 1, source="xla", pid=7))
    st.apply(ev.CompileFinished(t=T0 + 4, source="xla", pid=7, duration_s=3.0))
    for i in range(20):
        st.apply(ev.StepEnded(t=T0 + 5 + 0.5 * i, pid=7, step=i, duration_s=0.5, samples=8, data_wait_s=0.1))
    return st


@pytest.fixture
def calls(monkeypatch):
    count = [0]
    real = tb.time_breakdown

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    for mod in (run_view_mod, build_mod, run_figures_mod, goodput_mod):
        monkeypatch.setattr(mod, "time_breakdown", counted)
    return count


def test_a_frame_computes_it_once_and_its_parts_agree(calls):
    st = a_run()
    view = run_view_mod.view_of(st, T0 + 20)
    assert calls[0] == 1
    fresh = {x.name: x for x in tb.time_breakdown(st, T0 + 20)}
    assert {x.name: x for x in view.time_breakdown} == fresh
    assert view.figures.training_share == fresh["training"].share > 0
    assert view.figures.goodput == goodput_mod.goodput(st, T0 + 20)  # from its own breakdown: the same


def test_a_summary_computes_it_once(calls):
    st = a_run()
    summary = build_mod.run_summary(st, T0 + 20)
    assert calls[0] == 1
    assert [x.name for x in summary.time_breakdown] == [x.name for x in tb.time_breakdown(st, T0 + 20)]
