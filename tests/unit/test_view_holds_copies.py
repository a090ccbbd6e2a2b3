"""The frame's view holds no record the reducer changes (issue 51 item 1): a compile's cause, its ranks'
durations and its cache verdict arrive after the compile, and a view built before them keeps what it showed."""

from __future__ import annotations

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.view.run_view import view_of

T0 = 1_790_000_000.0


def test_a_view_keeps_what_it_showed_while_the_reducer_changes_its_records():
    st = RunState()
    st.apply(ev.RunStarted(t=T0, run_id="copies", command=["train.py"]))
    st.apply(ev.ProcessAttached(t=T0 + 0.1, pid=7, ppid=1))
    st.apply(ev.CompileStarted(t=T0 + 1, source="xla", pid=7))
    st.apply(ev.CompileFinished(t=T0 + 3, source="xla", pid=7, duration_s=2.0))
    view = view_of(st, T0 + 4)
    (shown,) = view.compiles.records
    before = shown.as_dict()
    live = st.compiles[0]
    assert shown is not live and shown.as_dict() == live.as_dict()
    live.cause, live.cache = "shape-change", "hit"  # what a later event does to the reducer's record
    live.frames.append("train.py:12")
    live.ranks.append(3)
    assert shown.as_dict() == before and shown.frames == [] and shown.ranks == []
