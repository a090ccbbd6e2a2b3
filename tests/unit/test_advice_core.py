"""The shape-bucket advisor's arithmetic and the time breakdown, against answers derived here
independently (brute force over every bucket set; hand-made runs whose slices are known)."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.time_breakdown import time_breakdown
from neurondesk.core.findings.advice import best_buckets, candidate_plans
from neurondesk.core.reduce.state import RunState


def padded(counts: Counter, tops: list[int]) -> int:
    return sum(n * (min(b for b in tops if b >= v) - v) for v, n in counts.items())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.integers(1, 300), st.integers(1, 20), min_size=1, max_size=7), st.integers(1, 4))
def test_best_buckets_pad_no_more_than_any_other_set_of_k(hist, k):
    counts = Counter(hist)
    values = sorted(counts)
    tops = best_buckets(counts, k)
    assert len(tops) <= k and max(tops) == values[-1] and set(tops) <= set(values)
    brute = min(padded(counts, list(c) + [values[-1]])
                for r in range(0, min(k, len(values)))
                for c in itertools.combinations(values[:-1], r))
    assert padded(counts, tops) == brute


def test_plans_add_up_on_a_known_histogram():
    counts = Counter({100: 10, 120: 10, 250: 5, 256: 5})  # 30 steps over 4 shapes
    plans = {p.label: p for p in candidate_plans(counts, graphs_today=4, mean_compile_s=10.0, unit_s=0.001)}
    two = plans["powers of two"]
    assert (two.buckets, two.graphs) == ([128, 256], 2)
    extra = 10 * 28 + 10 * 8 + 5 * 6  # each value up to its power of two
    real = 10 * 100 + 10 * 120 + 5 * 250 + 5 * 256
    assert abs(two.padded_share - extra / real) < 1e-12
    assert two.compile_saved_s == 2 * 10.0 and abs(two.step_time_added_s - extra * 0.001) < 1e-12
    one = plans["best 1"]
    assert one.buckets == [256] and one.graphs == 1 and one.compile_saved_s == 30.0


def test_time_breakdown_slices_are_what_the_run_did_and_add_up_to_its_wall_time():
    s = RunState()
    s.apply(ev.RunStarted(t=100.0, run_id="r", command=["x"], warmup_steps=1, price_per_hour=36.0))
    # steps 0..3 of 1 s each from t=103 (3 s of start-up); step 0 compiled for 0.6 s; 0.1 s data wait each
    s.apply(ev.CompileFinished(t=103.7, source="probe", pid=1, step=0, duration_s=0.6, point="p"))
    # ... with 0.25 s between steps 1 and 2 that no step took (a checkpoint, say)
    for i, end in enumerate((104.0, 105.0, 106.25, 107.25)):
        s.apply(ev.StepEnded(t=end, pid=1, step=i, duration_s=1.0, data_wait_s=0.1, compiles=int(i == 0)))
    s.apply(ev.EvalPhase(t=108.5, pid=1, step=4, duration_s=0.5))  # evaluation after the last step
    s.apply(ev.RunFinished(t=110.0, exit_code=0))
    got = {x.name: x.seconds for x in time_breakdown(s)}
    assert got == {"start-up": 3.0, "compile": 0.6, "training": 3.0, "data wait": 0.4, "evaluation": 0.5,
                   "gaps": 0.25, "tear-down": 2.25}  # 110 - 107.25, less the 0.5 s evaluation in it
    assert abs(sum(got.values()) - s.elapsed_s()) < 1e-9
    assert {x.name: x.usd for x in time_breakdown(s)}["start-up"] == 0.03  # 3 s at $36/h
