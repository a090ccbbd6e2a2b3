"""The NEFF cache log's MISS lines placed at their step (core/reduce/compile/neff.py, issue 50 item 3):
the probe's neff_log_mark (the log's size at a step end, sent while the metrics cannot count) and the
log reader's MISS line offsets, in either order; the metrics and the log disagreeing, said."""

from __future__ import annotations

from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import run_events as ev
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.reduce.compile.compiles import seconds_unknown
from neurondesk.core.reduce.state import RunState

T0 = 1_800_000_000.0
PID = 100
LOG = "/run/torchneuron.log"


def _state() -> RunState:
    s = RunState()
    s.apply(ev.RunStarted(t=T0, run_id="r", command=["python", "train.py"]))
    s.apply(ev.ProcessAttached(t=T0 + 1, pid=PID))
    return s


def _step(s: RunState, i: int, shape: list[int]) -> None:
    s.apply(ev.StepEnded(t=T0 + 10 + i, pid=PID, step=i, duration_s=0.5, samples=shape[0], input_shapes=[shape]))


def _groups(s: RunState) -> list:
    return [(c.step, c.count, c.cause, c.duration_s) for c in s.compiles if c.source == "torchneuron"]


def test_misses_read_before_and_after_their_steps_mark_are_placed_at_that_step():
    s = _state()
    # step 0: three misses read while it ran, its mark after
    s.apply(nf.NeffCacheLog(t=T0 + 9, path=LOG, misses=3, miss_ends=[100, 200, 300], read_to=300))
    s.apply(nf.NeffLogMark(t=T0 + 10, pid=PID, step=0, size=300, input_shapes=[[4, 16]]))
    for i in range(20):
        _step(s, i, [4, 16])
    # step 20, a new shape: its mark first, its misses read later (two reads), after steps 21 and 22 ended
    s.apply(nf.NeffLogMark(t=T0 + 30, pid=PID, step=20, size=500, input_shapes=[[8, 16]]))
    for i in range(20, 23):
        _step(s, i, [8, 16])
    assert _groups(s) == [(0, 3, "first", None)]  # the mark's bytes not read yet: nothing placed
    s.apply(nf.NeffCacheLog(t=T0 + 33, path=LOG, misses=1, miss_ends=[400], read_to=450))
    assert len(_groups(s)) == 1
    s.apply(nf.NeffCacheLog(t=T0 + 34, path=LOG, misses=1, miss_ends=[480], read_to=520))
    assert _groups(s) == [(0, 3, "first", None), (20, 2, "shape-change", None)]
    assert s.parts.compiles.compile_count == 5 and seconds_unknown(s.parts.compiles.compiles)
    neff = s.parts.neff.cache()
    assert neff.compile_s is None and neff.counted_from == "log" and neff.disagreement is None


def test_the_metrics_and_the_log_disagreeing_is_said_and_agreeing_is_not():
    s = _state()
    s.apply(nf.NeffCompiles(t=T0 + 10, pid=PID, step=0, count=19, duration_s=1.9, input_shapes=[[4, 16]]))
    s.apply(nf.NeffCacheLog(t=T0 + 10, path=LOG, misses=19))
    assert s.parts.neff.cache().disagreement is None and s.parts.neff.cache().counted_from == "metrics"
    s.apply(nf.NeffCacheLog(t=T0 + 11, path=LOG, misses=8))
    said = s.parts.neff.cache().disagreement
    assert said is not None and "counted 19 eager NEFF compiles" in said and "27 cache misses" in said
    assert [d.message for d in diagnostics(s) if d.kind == "neff-sources-disagree"] == [said]  # shown as a finding
