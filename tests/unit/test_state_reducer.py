"""RunState on synthetic event streams: the steady rule, compile causes, quantiles, reduce errors,
probe drops, and dynamo reasons paired in any arrival order."""

from __future__ import annotations

import dataclasses
import random

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState, quantile
from neurondesk.core.summary.build import run_summary
from neurondesk.reports.summary_writer import to_markdown


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
    assert st.recompiles_after_warmup == 0  # the first compile of its point: a new graph, not a recompile
    st.apply(compile_at(10, shapes=[[4, 64]]))  # the same point again, new shapes
    assert st.recompiles_after_warmup == 1 and st.compiles[-1].recompile


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


def test_live_quantiles_are_exact_for_short_runs_and_within_half_a_percent_for_long_ones():
    st = RunState()
    rnd = random.Random(7)
    xs = []
    for i in range(20000):
        d = rnd.random()
        st.apply(step(i, d=d))
        if i >= 5:
            xs.append(d)
        if len(xs) == 3000:  # still every value kept: exact
            assert st.steady_quantile(0.5) == quantile(xs, 0.5)
            assert st.steady_quantile(0.9) == quantile(xs, 0.9)
        if i % 9 == 0:
            _ = st.steady_quantile(0.5)  # what the console asks
    for q in (0.5, 0.9, 0.99):
        assert abs(st.steady_quantile(q) / quantile(xs, q) - 1) <= 0.005
    assert len(st.steady_times) == len(xs)


# ---------------------------------------------------------------- composition, errors


def test_every_registered_kind_reaches_a_reducer():
    from neurondesk.core.events.registry import EVENT_TYPES

    st = RunState()
    assert set(st._dispatch) == set(EVENT_TYPES)
    takers = [h.__self__ for h in st._dispatch["step"]]
    # which attempt a process is, then the lead, are known first (core/reduce/attempts.py)
    assert takers[:3] == [st.parts.attempts, st.parts.procs, st.parts.steps] and st.parts.ranks in takers


def test_apply_never_raises_counts_and_keeps_the_first_errors():
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=1))
    st.apply(step(0))
    # decodable shapes a handler cannot take (built in code, never through the codec)
    st.apply(ev.StepEnded(t=1.5, pid=1, step=None, duration_s=0.1))  # type: ignore[arg-type]
    st.apply(ev.LossReported(t=1.6, value="low"))  # type: ignore[arg-type]
    for i in range(1, 8):
        st.apply(ev.StepEnded(t="late", pid=1, step=i, duration_s=0.1))  # type: ignore[arg-type]
    for i in range(1, 4):
        st.apply(step(i))
    assert st.reduce_errors == 9 and len(st.reduce_error_samples) == 5
    assert st.reduce_error_samples[0].startswith("step at t=1.5: TypeError")
    assert st.reduce_error_samples[1].startswith("loss at t=1.6: TypeError")
    assert st.steps_done == 4 and st.steady_from == 1  # the run goes on
    typed = run_summary(st)
    s = typed.as_dict()
    assert s["reduce_errors"] == 9 and len(s["reduce_error_samples"]) == 5
    assert s["notices"][-1].startswith("9 event(s) could not be reduced and were skipped (first: step at t=1.5")
    assert "What the recording missed" in to_markdown(typed)


# ---------------------------------------------------------------- probe drops


def drop(t: float, pid: int, dropped: int, steps_lost: int, steps: int) -> ev.ProbeDropped:
    return ev.ProbeDropped(t=t, pid=pid, dropped=dropped, dropped_steps=steps_lost, steps=steps)


def test_lost_step_events_do_not_make_the_step_count_wrong():
    st = RunState()
    kept = [0, 1, 2, 6, 7]  # 3, 4, 5 lost; 8 and 9 lost too, after the last step message seen
    for i in kept:
        st.apply(step(i))
    assert st.steps_done == 8  # the highest index seen + 1, not the 5 messages that arrived
    st.apply(drop(10.5, 1, dropped=9, steps_lost=5, steps=10))
    assert st.steps_done == 10 and st.steps_lost == 5 and st.messages_lost == 9
    st.apply(drop(10.2, 1, dropped=7, steps_lost=4, steps=9))  # an older report, arriving late
    assert st.steps_done == 10 and st.steps_lost == 5
    st.apply(step(10))
    assert st.steps_done == 11
    s = run_summary(st).as_dict()
    assert s["steps"] == 11 and s["steps_lost"] == 5 and s["probe_messages_lost"] == 9
    assert "5 step events were lost (the recorder fell behind)" in s["notices"]


def test_drops_of_another_process_are_counted_but_do_not_move_the_lead():
    st = RunState()
    st.apply(drop(0.5, 1, dropped=2, steps_lost=2, steps=3))  # before the lead's first step
    st.apply(step(3))
    assert st.lead_pid == 1 and st.steps_done == 4
    st.apply(ev.StepEnded(t=4.0, pid=2, step=50, duration_s=0.1))
    st.apply(drop(4.5, 2, dropped=60, steps_lost=40, steps=90))
    assert st.steps_done == 4 and st.steps_lost == 42 and st.world == 2


# ---------------------------------------------------------------- dynamo reasons


SIZE = "tensor 'x' size mismatch at index 1. expected 512, actual 497"


def dynamo_compile(end: float, duration: float, pid: int | None = 7) -> list[ev.Event]:
    """The probe's two messages for one dynamo compile of frame 0 (start, then end)."""
    return [ev.CompileStarted(t=end - duration, source="dynamo", pid=pid),
            ev.CompileFinished(t=end, source="dynamo", pid=pid, duration_s=duration, trigger="dynamo",
                               point="dynamo@0:DYNAMO_COMPILE")]


def reason(t: float, text: str = SIZE, pid: int | None = 7) -> ev.DynamoRecompile:
    return ev.DynamoRecompile(t=t, reason=text, function="forward", location="m.py:3", pid=pid)


def dynamo_causes(events: list[ev.Event]) -> list[tuple[str, str | None]]:
    st = RunState()
    for e in events:
        st.apply(e)
    return [(c.cause, c.reason) for c in st.compiles]


@pytest.mark.parametrize("duration", [0.05, 2.0, 45.0])  # 45 s: a recompile longer than the old window
@pytest.mark.parametrize("order", ["reason-first", "compile-first", "reason-in-the-middle"])
def test_dynamo_reason_pairs_whatever_the_arrival_order_and_delay(order, duration):
    first = dynamo_compile(10.0, 5.0)
    start, end = dynamo_compile(20.0 + duration, duration)
    printed = reason(20.0)  # the guard failure is printed just before the recompile starts
    if order == "reason-first":
        events = [*first, printed, start, end]
    elif order == "compile-first":  # output read late (a tailed file): after the compile's end
        events = [*first, start, end, dataclasses.replace(printed, t=end.t + 0.1)]
    else:
        events = [*first, start, dataclasses.replace(printed, t=20.1), end]
    assert dynamo_causes(events) == [("first", None), ("shape-change", SIZE)]


def test_two_recompiles_pair_oldest_first_and_only_within_their_process():
    second = "___check_obj_id(L['scale'], 42)"
    a, b, c = dynamo_compile(10.0, 1.0), dynamo_compile(12.0, 1.0), dynamo_compile(14.0, 1.0)
    late = [reason(14.5), reason(14.6, second)]
    assert dynamo_causes([*a, *b, *c, *late]) == [("first", None), ("shape-change", SIZE), ("object-identity", second)]
    early = [reason(11.0), reason(13.0, second)]
    assert dynamo_causes([*a, *early, *b, *c]) == [("first", None), ("shape-change", SIZE), ("object-identity", second)]
    # another rank's guard failure, printed while pid 7's recompile waits, is not pid 7's reason
    other = reason(12.5, "rank 1: " + SIZE, pid=8)
    assert dynamo_causes([*a, *b, other, reason(12.6, second)]) == [("first", None), ("object-identity", second)]


def test_a_lazily_compiled_backward_never_takes_the_forwards_reason():
    fwd = dynamo_compile(20.0, 1.0)
    bwd = [dataclasses.replace(e, t=e.t + 1.5, point="dynamo@0:LAZY_BACKWARD") if isinstance(e, ev.CompileFinished)
           else dataclasses.replace(e, t=e.t + 1.5) for e in fwd]
    first = [*dynamo_compile(10.0, 1.0), *[dataclasses.replace(e, t=e.t + 1.5, point="dynamo@0:LAZY_BACKWARD")
                                           if isinstance(e, ev.CompileFinished) else e
                                           for e in dynamo_compile(10.0, 1.0)]]
    # the guard line read late, after the forward recompile and its backward both ended
    assert dynamo_causes([*first, *fwd, *bwd, reason(21.6)]) == [
        ("first", None), ("first", None), ("shape-change", SIZE), ("new-graph", None)]


def test_a_reason_far_from_any_recompile_is_not_paired():
    a, b = dynamo_compile(10.0, 1.0), dynamo_compile(200.0, 1.0)
    assert dynamo_causes([*a, reason(60.0), *b]) == [("first", None), ("new-graph", None)]


@pytest.mark.parametrize(("reason_text", "kind"), [
    ("tensor 'L['x']' size mismatch at index 0. expected 8, actual 16", "shape-change"),
    ("GLOBAL_STATE changed: grad_mode ", "grad-mode"),
    ("GLOBAL_STATE changed: autocast ", "global-state"),
    ("tensor 'L['x']' dtype mismatch. expected Float, actual Half", "dtype-change"),
    ("tensor 'L['x']' requires_grad mismatch. expected requires_grad=1", "requires-grad"),
    ("___check_obj_id(L['self'].scale, 140234)", "object-identity"),
    ("___check_type_id(L['cfg'], 9391)", "type-change"),
    ("something dynamo never printed before", "guard-failed"),
])
def test_a_dynamo_recompile_is_named_by_the_guard_that_failed(reason_text, kind):
    a, b = dynamo_compile(10.0, 1.0), dynamo_compile(12.0, 1.0)
    assert dynamo_causes([*a, reason(11.5, reason_text), *b])[1] == (kind, reason_text)


def eval_compile(t: float, step: int, point: str = "sync@train.py:40") -> ev.CompileFinished:
    return ev.CompileFinished(t=t, source="probe", pid=1, step=step, duration_s=1.0, point=point,
                              trigger="sync", phase="eval", input_shapes=[[32, 64]])


def test_evaluation_compiles_are_not_training_recompiles_and_leave_the_step_steady():
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=2, price_per_hour=3.6))
    st.apply(compile_at(0, shapes=[[8, 64]]))
    for i in range(12):
        st.apply(step(i))
        if i == 9:  # the first evaluation: its graphs compile (twice at one point: warm-up of its own)
            st.apply(eval_compile(9.1, 10))
            st.apply(eval_compile(9.2, 10))
            st.apply(ev.EvalPhase(t=9.5, pid=1, step=10, duration_s=0.5, batches=4, samples=128, compiles=2))
    assert [c.cause for c in st.compiles] == ["first", "first", "new-graph"]
    assert st.recompiles_after_warmup == 0  # first compiles of a new phase and its own warm-up
    assert 10 not in st.steps_with_compile and len(st.steady_times) == 10  # steps 2..11
    assert st.steady_samples_per_s == pytest.approx(8 / 0.1)  # training samples over training time alone
    st.apply(eval_compile(20.0, 12))  # a later evaluation compiles a new graph at its point: not a recompile
    assert st.compiles[-1].cause == "new-graph" and st.recompiles_after_warmup == 0
    later = ev.CompileFinished(t=21.0, source="probe", pid=1, step=12, duration_s=1.0, point="sync@train.py:40",
                               trigger="sync", phase="eval", input_shapes=[[7, 64]])
    st.apply(later)  # ... with other shapes: a recompile of that point
    summary = run_summary(st).as_dict()
    assert summary["recompiles_after_warmup"] == 1 and summary["recompiles_by_phase"] == {"train": 0, "eval": 1}
    assert summary["evaluation"]["phases"] == 1 and summary["evaluation"]["batches"] == 4
    assert summary["evaluation"]["cost_usd"] == pytest.approx(3.6 * 0.5 / 3600)
