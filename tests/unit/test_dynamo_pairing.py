"""Issue 15: a dynamo guard-failure line is stamped when its recompile starts, the compile event
when it ends. A 29.9 s and a 30.1 s recompile (either side of the old 30 s window between the two
stamps) must both pair with their reason, whichever half arrives first."""

from __future__ import annotations

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState

SIZE = "tensor 'x' size mismatch at index 1. expected 512, actual 497"


def causes(events: list[ev.Event]) -> list[tuple[str, str | None]]:
    st = RunState()
    for e in events:
        st.apply(e)
    return [(c.cause, c.reason) for c in st.compiles]


def compile_events(start: float, duration: float) -> list[ev.Event]:
    return [ev.CompileStarted(t=start, source="dynamo", pid=7),
            ev.CompileFinished(t=start + duration, source="dynamo", pid=7, duration_s=duration, trigger="dynamo",
                               point="dynamo@0:DYNAMO_COMPILE")]


@pytest.mark.parametrize("duration", [29.9, 30.1])
@pytest.mark.parametrize("reason_arrives", ["before-the-start", "after-the-end"])
def test_a_recompile_either_side_of_30_s_pairs_with_its_reason(duration, reason_arrives):
    first = compile_events(1.0, 2.0)
    start, end = compile_events(100.0, duration)
    reason = ev.DynamoRecompile(t=100.0, reason=SIZE, function="forward", location="m.py:3", pid=7)
    events = [*first, reason, start, end] if reason_arrives == "before-the-start" else [*first, start, end, reason]
    assert causes(events) == [("first", None), ("shape-change", SIZE)]
