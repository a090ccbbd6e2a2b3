"""Bounded quantiles and the downsampled step-time series (core/node/sketch.py): within the stated 0.5%
of the exact quantile at any length, memory that does not grow with the stream, a chart that
still shows a slowdown in the middle of a long run."""

from __future__ import annotations

import math
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurondesk.core.events import run_events as ev
from neurondesk.core.node.sketch import EXACT_KEEP, MAX_BUCKETS, Downsampled, QuantileSketch
from neurondesk.core.reduce.state import RunState, quantile


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(1e-6, 1e3), min_size=2, max_size=800),
       q=st.sampled_from([0.0, 0.1, 0.5, 0.9, 0.99, 1.0]))
def test_quantiles_past_the_exact_part_are_within_half_a_percent(values, q):
    sk = QuantileSketch(exact_keep=1)  # the histogram answers from the second value on
    for v in values:
        sk.add(v)
    assert not sk.is_exact
    exact = quantile(values, q)
    assert abs(sk.quantile(q) - exact) <= 0.005 * exact + 1e-12


@pytest.mark.slow  # seconds of pure work: make test runs it, make test-fast does not
def test_quantiles_of_a_million_step_times_spread_over_six_decades_stay_within_half_a_percent():
    rnd = random.Random(3)
    values = [math.exp(rnd.uniform(math.log(1e-5), math.log(10))) for _ in range(200_000)]
    values += [rnd.lognormvariate(math.log(0.05), 0.1) for _ in range(800_000)]  # the steady bulk
    sk = QuantileSketch()
    for v in values:
        sk.add(v)
    values.sort()
    for q in (0.5, 0.9, 0.999):
        exact = quantile(values, q)
        assert abs(sk.quantile(q) / exact - 1) <= 0.005
    # bounded: buckets for six decades, not one slot per value
    assert len(sk.counts) <= math.log(1e6) / math.log(sk.gamma) + 2 < 3000
    assert len(pickle.dumps(sk)) < 40_000


def test_short_streams_are_exact():
    rnd = random.Random(1)
    xs = [rnd.random() for _ in range(EXACT_KEEP)]
    sk = QuantileSketch()
    for x in xs:
        sk.add(x)
    assert sk.is_exact and list(sk) == xs
    assert sk.quantile(0.5) == quantile(xs, 0.5) and sk.quantile(0.9) == quantile(xs, 0.9)
    assert sk.count_at_most(0.5) == sum(x <= 0.5 for x in xs)


def test_zero_values_and_counts_below_a_bound():
    sk = QuantileSketch(exact_keep=0)
    for x in [0.0] * 10 + [1.0] * 10 + [2.0] * 80:
        sk.add(x)
    assert sk.quantile(0.0) == 0.0 and abs(sk.quantile(0.5) - 2.0) <= 0.01
    assert sk.count_at_most(0) == 10 and sk.count_at_most(1.0) == 20 and sk.count_at_most(100) == 100
    assert sk.total == 170.0


def test_the_downsampled_series_stays_bounded_and_keeps_a_slowdown_visible():
    ds = Downsampled()
    for step in range(1_000_000):
        slow = 400_000 <= step < 410_000  # 1% of the run, twice as slow
        ds.add(step, 0.1 if slow else 0.05)
    pts = ds.points()
    assert len(pts) <= MAX_BUCKETS
    assert pts[0].first_step == 0 and pts[-1].last_step == 999_999
    assert sum(p.n for p in pts) == 1_000_000
    assert all(p.min_s <= p.median_s <= p.max_s for p in pts)
    hit = [p for p in pts if p.first_step <= 405_000 <= p.last_step][0]
    assert hit.max_s == 0.1 and hit.median_s > 0.05  # the slowdown fills its bucket
    assert max(p.median_s for p in pts if p.last_step < 390_000) == 0.05


def test_reduced_state_keeps_the_compile_wall_and_the_whole_run_apart_from_the_last_steps():
    st_ = RunState()
    st_.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=2))
    t = 0.0
    for i in range(50_000):
        d = 30.0 if i < 3 else (0.08 if 30_000 <= i < 31_000 else 0.05)
        t += d
        st_.apply(ev.StepEnded(t=t, pid=1, step=i, duration_s=d, compiles=1 if i < 3 else 0))
    steps = st_.parts.steps
    assert [p.max_s for p in steps.series_compiled.points()] == [30.0, 30.0, 30.0]
    assert steps.series.points()[0].first_step == 3
    assert any(p.max_s == 0.08 for p in steps.series.points())
    assert len(st_.history) == 2000  # the recent steps, as before
    assert len(pickle.dumps(st_)) < 200_000


def test_the_chart_of_a_run_longer_than_its_history_is_the_whole_run():
    from neurondesk.core.figures.series import chart_line

    st_ = RunState()
    st_.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=2))
    t = 0.0
    for i in range(1500):
        t += 0.05
        st_.apply(ev.StepEnded(t=t, pid=1, step=i, duration_s=30.0 if i == 0 else 0.05, compiles=int(i == 0)))
    line, whole = chart_line(st_.parts.steps, points=100)
    assert not whole  # the recent history holds it all: the rolling line, as before
    for i in range(1500, 20_000):
        t += 0.05
        st_.apply(ev.StepEnded(t=t, pid=1, step=i, duration_s=0.2 if 9_000 <= i < 9_500 else 0.05))
    line, whole = chart_line(st_.parts.steps, points=100)
    assert whole and len(line.steps) <= 100 and line.steps[-1] == 19_999
    assert line.compile_steps == [0] and line.compile_s == [30.0]  # the compile wall, long out of the history
    assert max(line.p90_s) == 0.2 and any(m > 0.05 for m in line.median_s)  # the slowdown at step 9,000


@settings(max_examples=80, deadline=None)
@given(chunks=st.lists(st.lists(st.floats(0.0, 1e3) | st.just(0.0), max_size=40), max_size=12),
       keep=st.integers(1, 60))
def test_adding_a_batch_is_adding_its_values_one_by_one(chunks, keep):
    """add_many (a StepBatch's steps) leaves the sketch exactly as add() of each value would:
    counts, zeros, the running sum to the bit, min/max and the exact part (kept or dropped)."""
    one, many = QuantileSketch(exact_keep=keep), QuantileSketch(exact_keep=keep)
    for chunk in chunks:
        for x in chunk:
            one.add(x)
        many.add_many(chunk)
        assert many.__dict__ == one.__dict__


@settings(max_examples=80, deadline=None)
@given(chunks=st.lists(st.lists(st.floats(0.0, 10.0), max_size=50), max_size=12), max_buckets=st.integers(2, 9))
def test_a_downsampled_batch_is_its_steps_one_by_one(chunks, max_buckets):
    """Downsampled.add_many fills, closes and merges buckets exactly as add() does step by step."""
    one, many = Downsampled(max_buckets=max_buckets), Downsampled(max_buckets=max_buckets)
    step = 0
    for chunk in chunks:
        for i, x in enumerate(chunk):
            one.add(step + i, x)
        many.add_many(step, chunk)
        step += len(chunk)
        assert many == one
