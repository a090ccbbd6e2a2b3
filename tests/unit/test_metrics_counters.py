"""The exporter's samples and tokens counters (exporter/snapshot.py's Snapshotter) count every step of the
lead, times the world, however many steps arrive between two snapshots: one probe batch carries up to
4096 steps (its MAX_STEPS) while the reducer's step history keeps the last 2000 (core/reduce/steps.HISTORY)."""

from __future__ import annotations

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.reduce.steps import HISTORY
from neurondesk.exporter.snapshot import Snapshotter

# the exporter under the newest prometheus_client too (make test-latest)
pytestmark = pytest.mark.latest

PID = 41


def batch(first: int, n: int, t: float) -> ev.StepBatch:
    return ev.StepBatch(t=t, pid=PID, step=first, ts=[t - (n - i) * 1e-4 for i in range(n)], duration_s=[1e-4] * n,
                        data_wait_s=[0.0] * n, samples=[8] * n, tokens=[8 * 64] * n)


def test_a_batch_longer_than_the_step_history_is_counted_whole():
    state, snap = RunState(), Snapshotter(job_id="j", node="n")
    state.apply(ev.ProcessAttached(t=0.0, pid=PID))
    state.apply(batch(0, 10, 1.0))
    first = snap.take(state, 1.0)
    assert (first.samples, first.tokens) == (80, 80 * 64)
    n = 4096  # a fast loop: the probe's largest batch, more than HISTORY steps between two snapshots
    assert n > HISTORY
    state.apply(batch(10, n, 2.0))
    state.apply(batch(10 + n, 1500, 3.0))
    s = snap.take(state, 3.0)
    assert s.figures.steps == 10 + n + 1500
    assert (s.samples, s.tokens) == (8 * s.figures.steps, 8 * 64 * s.figures.steps)
    again = snap.take(state, 3.5)  # nothing new: the counters stay
    assert (again.samples, again.tokens) == (s.samples, s.tokens)
