"""Coalesced steps (issue 21 item 7): the probe sends ordinary steps in columns, one `steps`
message (a StepBatch event, one journal line) per send instead of one `step` each.

- reducing a StepBatch equals reducing the StepEnded events it stands for, in its place (a
  hypothesis property over step streams with compiles, evaluations, shape changes, two ranks,
  overrides and process-tree samples);
- the real probe's batches decode to every step, in order, each with the fields a `step` line of
  its own would have had, and nothing that is not ordinary is coalesced;
- the decoder refuses a batch that cannot be true (columns of different lengths, a NaN, a step
  index out of range), as one ParseProblem.
"""

from __future__ import annotations

import array
import json
import math
import os
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from probe_socket import SocketReader, load_probe_module
from step_messages import expand_steps

from neurondesk.collectors.probe_messages import ProbeDecoder
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import decode_event_line, encode_event
from neurondesk.core.reduce.state import RunState

LEAD, OTHER = 4001, 4002


# ------------------------------------------------------------------ the reducer: batch == its steps

# Counted per event (a batch is one event in the journal: checkpoints and replays count those), and
# the batch path's own note for the telemetry: not figures of the run.
NOT_FIGURES = {"event_count", "first_of_batch_steady"}


def figures(x, seen=None):
    """Everything a reducer holds, as builtins, for an equality that sees every figure."""
    seen = set() if seen is None else seen
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, dict):
        return {repr(k): figures(v, seen) for k, v in x.items()}
    if isinstance(x, list | tuple | deque | array.array):
        return [figures(v, seen) for v in x]
    if isinstance(x, set | frozenset):
        return sorted(repr(figures(v, seen)) for v in x)
    if callable(x) and not hasattr(x, "__dict__"):
        return repr(type(x))
    if id(x) in seen:
        return f"<{type(x).__name__} seen>"
    seen.add(id(x))
    names = list(getattr(x, "__dict__", {})) + [n for c in type(x).__mro__ for n in getattr(c, "__slots__", ())]
    return {"type": type(x).__name__,
            **{n: figures(getattr(x, n), seen) for n in names if n not in NOT_FIGURES and hasattr(x, n)}}


@st.composite
def step_streams(draw):
    """A run: its start, then the steps of two processes with compiles, evaluations, shape changes
    and process-tree samples between them; each step says whether a send falls before it."""
    out: list = [ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=draw(st.integers(0, 6)),
                               samples_per_step=draw(st.none() | st.just(16)))]
    t = 1.0
    next_step = {LEAD: 0, OTHER: 0}
    has = {"samples": draw(st.booleans()), "tokens": draw(st.booleans()), "executions": draw(st.booleans()),
           "presync": draw(st.booleans()), "phases": draw(st.booleans())}
    shapes = [[8, 32]]
    for _ in range(draw(st.integers(1, 60))):
        t += draw(st.floats(0.0, 0.5))
        what = draw(st.sampled_from(["step"] * 8 + ["compile", "tree", "flip", "shape", "other"]))
        if what == "compile":
            out.append(ev.CompileFinished(t=t, source=draw(st.sampled_from(["probe", "neuron-log"])), pid=LEAD,
                                          step=next_step[LEAD] + draw(st.integers(0, 1)), duration_s=1.0))
            continue
        if what == "tree":
            out.append(dev.ProcessTreeSample(t=t, root_pid=LEAD, total_cpu_percent=50.0))
            continue
        if what == "flip":
            key = draw(st.sampled_from(sorted(has)))
            has[key] = not has[key]
        if what == "shape":
            shapes = [[draw(st.integers(1, 4)), 32]]
        pid = OTHER if what == "other" else LEAD
        d = draw(st.floats(0.0, 2.0))
        samples = draw(st.integers(1, 64)) if has["samples"] else None
        out.append((draw(st.booleans()), ev.StepEnded(
            t=t, pid=pid, step=next_step[pid], duration_s=d, data_wait_s=draw(st.floats(0.0, 0.1)),
            samples=samples, tokens=samples * 32 if samples and has["tokens"] else None,
            executions=draw(st.integers(0, 3)) if has["executions"] else None,
            compiles=draw(st.sampled_from([0] * 6 + [1])), eval_s=draw(st.sampled_from([0.0] * 6 + [0.25])),
            presync_s=d / 2 if has["presync"] else None, input_shapes=shapes if samples else None,
            phases_s=[draw(st.floats(0.0, 0.3)) for _ in range(ev.PHASES_PER_STEP)] if has["phases"] else None)))
        next_step[pid] += 1
    return out


def ordinary(s: ev.StepEnded) -> bool:
    return s.compiles == 0 and s.eval_s == 0.0


def signature(s: ev.StepEnded) -> tuple:
    return (s.pid, s.samples is not None, s.tokens is not None, s.executions is not None, s.presync_s is not None,
            s.phases_s is not None, s.input_shapes)


def coalesce(stream: list) -> list[ev.Event]:
    """The stream as the probe sends it: runs of ordinary steps of one process with the same
    fields and shapes become one StepBatch, up to the next send (or anything else)."""
    out: list[ev.Event] = []
    run: list[ev.StepEnded] = []

    def close() -> None:
        if run:
            col = lambda name: [getattr(s, name) for s in run] if getattr(run[0], name) is not None else None  # noqa: E731
            out.append(ev.StepBatch(t=run[-1].t, pid=run[0].pid, step=run[0].step, ts=[s.t for s in run],
                                    duration_s=col("duration_s"), data_wait_s=col("data_wait_s"),
                                    samples=col("samples"), tokens=col("tokens"), executions=col("executions"),
                                    presync_s=col("presync_s"), input_shapes=run[0].input_shapes,
                                    phases_s=[x for s in run for x in s.phases_s] if run[0].phases_s else None))
            run.clear()

    for item in stream:
        if not isinstance(item, tuple):
            close()
            out.append(item)
            continue
        send_before, s = item
        if send_before or not ordinary(s) or (run and signature(run[-1]) != signature(s)):
            close()
        if ordinary(s):
            run.append(s)
        else:
            out.append(s)
    close()
    return out


def reduced(events: list[ev.Event]) -> RunState:
    state = RunState()
    for e in events:
        state.apply(decode_event_line(encode_event(e)))  # through the journal's codec, as a replay reads it
    return state


@pytest.mark.slow  # seconds of pure work: `make test` runs it, `make test-fast` does not
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(stream=step_streams())
def test_reducing_a_batch_equals_reducing_its_steps(stream):
    one_by_one = [item[1] if isinstance(item, tuple) else item for item in stream]
    batched = coalesce(stream)
    assert [s for e in batched for s in (e.steps() if isinstance(e, ev.StepBatch) else [e])] == one_by_one
    a, b = reduced(one_by_one), reduced(batched)
    assert a.reduce_errors == b.reduce_errors == 0, (a.reduce_error_samples, b.reduce_error_samples)
    assert figures(b.parts) == figures(a.parts)


def test_a_batch_of_the_run_is_reduced_as_its_steps_are_where_it_matters():
    """Not only equal: the figures are those of the steps (the property above could pass on a
    reducer that ignored both forms)."""
    steps = [ev.StepEnded(t=1.0 + i, pid=LEAD, step=i, duration_s=0.5, samples=8) for i in range(10)]
    batch = coalesce([(False, s) for s in steps])
    assert len(batch) == 1 and isinstance(batch[0], ev.StepBatch)
    state = reduced([ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=2), *batch])
    assert state.steps_done == 10
    assert state.parts.steps.steady_samples == 8 * 8
    assert state.parts.ranks.ranks[LEAD].steady_steps == 8


def test_batches_longer_than_the_history_and_the_exact_part_reduce_as_their_steps():
    """The column-at-a-time path on batches as long as the probe sends (up to 4,096 steps): past
    the step history's bound, past the sketch's exact part, across the warm-up, around a step
    marked compiled and into the ranks' presync window; the same figures as step by step."""
    stream: list = [ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=3)]
    t, step = 1.0, 0
    for size in (2, 4096, 4096, 1, 3000, 600):  # the last batch alone goes column by column to the end
        for i in range(size):
            d = 0.01 + (step % 7) * 1e-4
            t += d
            stream.append((i == 0, ev.StepEnded(t=t, pid=LEAD, step=step, duration_s=d, data_wait_s=d / 10,
                                                samples=8, tokens=256, executions=1, presync_s=d / 2,
                                                input_shapes=[[8, 32]])))
            step += 1
        if size == 1:  # a compile attributed to a step that comes in the next batch
            stream.append(ev.CompileFinished(t=t, source="neuron-log", pid=LEAD, step=step + 5, duration_s=1.0))
    one_by_one = [item[1] if isinstance(item, tuple) else item for item in stream]
    batched = coalesce(stream)
    assert max(len(e) for e in batched if isinstance(e, ev.StepBatch)) == 4096
    a, b = reduced(one_by_one), reduced(batched)
    assert figures(b.parts) == figures(a.parts)
    assert b.steps_done == step and not b.parts.steps.steady_times.is_exact


# ------------------------------------------------------------------ the real probe's batches

def new_probe():
    reader = SocketReader()
    return load_probe_module().Probe(reader.path), reader


def test_the_probe_coalesces_ordinary_steps_and_sends_the_rest_alone_in_order():
    probe, reader = new_probe()
    probe.send({"kind": "notice", "level": "info", "source": "test", "message": "start"})  # connects
    probe.transport.last_flush = math.inf  # no timed send: the batches are cut by what this test does
    clock = probe.clock
    plan = []  # what each step was: (kind of message it must travel in, samples)
    for i in range(40):
        if i == 10:
            clock.step_compiles = 1  # a step that compiled: alone
        if i == 20:
            probe.send({"kind": "notice", "level": "info", "source": "test", "message": "between"})
        if i >= 30:
            clock.samples, clock.tokens, clock.shapes = 4, 40, [[4, 10]]  # new fields: a new batch
        clock.step_start = None
        clock.end_step()
        plan.append(("step" if i == 10 else "steps", 4 if i >= 30 else None))
    lines = reader.close(probe)
    decoder = ProbeDecoder(started_t=0.0)
    events = [e for line in lines for e in decoder.decode(line, 4e9)]
    assert decoder.refused == 0 and not any(isinstance(e, ev.ParseProblem) for e in events)
    kinds = [e.kind for e in events]
    assert kinds[0] == "process_attached"
    assert "steps" in kinds and kinds.count("step") == 1  # coalesced, but not the step that compiled
    # cut by the step that compiled (10), by the notice (before 20), by the new fields (30)
    assert [len(e) for e in events if isinstance(e, ev.StepBatch)] == [10, 9, 10, 10]
    steps = [s for e in events for s in (e.steps() if isinstance(e, ev.StepBatch) else [e])
             if isinstance(s, ev.StepEnded)]
    assert [s.step for s in steps] == list(range(40))
    assert [s.samples for s in steps] == [p[1] for p in plan]
    assert all(s.tokens == 40 and s.input_shapes == [[4, 10]] for s in steps[30:])
    assert steps[10].compiles == 1 and all(s.compiles == 0 for s in steps if s.step != 10)
    # the notice sent before step 20 is between steps 19 and 20 on the wire, as it happened
    flat = [x for e in events for x in (e.steps() if isinstance(e, ev.StepBatch) else [e])]
    at = next(i for i, x in enumerate(flat) if isinstance(x, ev.Notice) and x.message == "between")
    assert flat[at - 1].step == 19 and flat[at + 1].step == 20


def test_a_batch_says_what_the_step_lines_said():
    """The fields of each step in a batch are what a `step` line of its own carried (the schema
    test in test_probe_send.py checks the line)."""
    probe, reader = new_probe()
    clock = probe.clock
    clock.is_xla = True
    for _ in range(6):
        clock.samples, clock.tokens, clock.shapes = 8, 512, [[8, 64]]
        clock.step_execs, clock.data_wait, clock.presync = 3, 0.25, 0.125
        clock.fwd, clock.bwd, clock.opt, clock.sync, clock.phased = 0.01, 0.02, 0.003, 0.5, True
        clock.step_start = None
        clock.end_step()
    raw = [json.loads(line) for line in reader.close(probe)]
    batches = [m for m in raw if m["kind"] == "steps"]
    assert batches and list(batches[0])[:4] == ["kind", "t", "pid", "step"]
    cols = batches[0]["phase_cols"]  # the phases as columns; h2d and collective, zero throughout, as 0
    assert "phases_s" not in batches[0] and cols[0] == 0 and cols[5] == 0 and len(cols[2]) == len(cols[4]) >= 1
    steps = [m for m in expand_steps(raw) if m["kind"] == "step"]
    assert [m["step"] for m in steps] == list(range(6))
    for m in steps:
        assert (m["samples"], m["tokens"], m["executions"], m["input_shapes"]) == (8, 512, 3, [[8, 64]])
        assert m["data_wait_s"] == 0.25 and m["presync_s"] == 0.125 and m["compiles"] == 0
        assert m["phases_s"] == [0.0, 0.01, 0.02, 0.003, 0.5, 0.0]  # h2d fwd bwd opt sync collective
        assert m["pid"] == os.getpid() and 0 <= m["duration_s"] < 60 and abs(m["t"] - batches[-1]["t"]) < 60


# ------------------------------------------------------------------ the decoder's bounds

def _batch_line(**change) -> bytes:
    msg = {"kind": "steps", "t": 10.0, "pid": 77, "step": 5, "ts": [9.0, 10.0], "duration_s": [0.5, 0.5],
           "data_wait_s": [0.0, 0.1], "samples": [8, 8]}
    msg.update(change)
    return (json.dumps(msg) + "\n").encode()


@pytest.mark.parametrize(("change", "words"), [
    ({}, None),
    ({"samples": [8]}, "columns of a batch of 2 steps differ"),
    ({"duration_s": [0.5, math.nan]}, "duration_s"),
    ({"data_wait_s": [0.0, -1.0]}, "data_wait_s"),
    ({"step": 10**12}, "outside 0..1,000,000,000,000"),
    ({"samples": [8, -1]}, "samples -1..8"),
    ({"ts": [9.0, 1e12]}, "outside the run"),
    ({"ts": [], "duration_s": [], "data_wait_s": [], "samples": []}, "a batch of 0 steps"),
    ({"phases_s": [0.1] * 11}, "columns of a batch of 2 steps differ"),
    ({"phases_s": [0.1] * 11 + [-0.5]}, "phase duration"),
])
def test_the_decoder_refuses_a_batch_that_cannot_be_true(change, words):
    decoder = ProbeDecoder(started_t=0.0)
    (e,) = decoder.decode(_batch_line(**change), 20.0)
    if words is None:
        assert isinstance(e, ev.StepBatch) and len(e) == 2 and decoder.refused == 0
        return
    assert isinstance(e, ev.ParseProblem) and e.error.startswith("out of range") and words in e.error, e.error
    assert decoder.refused == 1


@pytest.mark.parametrize(("cols", "words"), [
    ([0, [0.1, 0.2], 0, 0, 0, 0], None),
    ([0.5, [0.1, 0.2], 0, 0, 0, 0], None),  # a column the same in every step: that number
    ([0, 0, 0, 0, 0], "phase_cols has 5 columns, not 6"),
    ([0, [0.1], 0, 0, 0, 0], "phase_cols column 1 has 1 values for a batch of 2 steps"),
    ([0, "x", 0, 0, 0, 0], "phase_cols"),
])
def test_phase_columns_become_each_steps_phases_or_are_refused(cols, words):
    decoder = ProbeDecoder(started_t=0.0)
    (e,) = decoder.decode(_batch_line(phase_cols=cols), 20.0)
    if words is None:
        assert isinstance(e, ev.StepBatch) and e.phase_cols is None
        const = cols[0] if not isinstance(cols[0], list) else None
        assert e.phases_of(0) == [const, 0.1, 0.0, 0.0, 0.0, 0.0] and e.phases_of(1) == [const, 0.2, 0.0, 0.0, 0.0, 0.0]
        assert decode_event_line(encode_event(e)) == e  # journaled flat, read back the same
        return
    assert isinstance(e, ev.ParseProblem) and words in e.error, e.error


def test_a_ranks_window_keeps_its_last_steady_steps_in_any_order_they_come():
    """The rank window (2 x WINDOW steady steps' presync) drops its smallest step: by the first key
    while steps come in ascending order (the fast way), by min() once one came out of order."""
    from neurondesk.core.reduce.ranks import WINDOW

    for order in (list(range(400)), list(range(200)) + list(range(300, 400)) + list(range(200, 300))):
        state = RunState()
        state.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=0))
        kept: dict[int, tuple[float, float]] = {}
        for i in order:
            state.apply(ev.StepEnded(t=1.0 + i, pid=LEAD, step=i, duration_s=0.5, presync_s=i / 1000, data_wait_s=0.0))
            kept[i] = (i / 1000, 0.0)
            if len(kept) > 2 * WINDOW:
                del kept[min(kept)]
        assert state.parts.ranks.ranks[LEAD].by_step == kept
        assert list(state.parts.ranks.ranks[LEAD].by_step) == list(kept)
