"""The reduction of TorchNeuron's NEFF events (core/reduce/compile/neff.py, issue 44): the live line while
NEFFs compile, a group per step and cause, one row for the ranks, graphs counted once whichever
source told of them, cold or warm first steps. Events as the probe and the log collector send them."""

from __future__ import annotations

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.reduce.state import RunState

T0 = 1_800_000_000.0
PID = 100


def _state(steps: int = 20, shape: list[int] | None = None, pids: tuple[int, ...] = (PID,)) -> RunState:
    s = RunState()
    s.apply(ev.RunStarted(t=T0, run_id="r", command=["python", "train.py"]))
    for rank, pid in enumerate(pids):
        s.apply(ev.ProcessAttached(t=T0 + 1, pid=pid, rank=rank if len(pids) > 1 else None))
    for i in range(steps):
        for pid in pids:
            s.apply(ev.StepEnded(t=T0 + 10 + i, pid=pid, step=i, duration_s=0.5, samples=4,
                                 input_shapes=[shape or [4, 16]]))
    return s


def _groups(s: RunState) -> list:
    return [c for c in s.compiles if c.source == "torchneuron"]


def test_while_neffs_compile_the_live_line_counts_them_and_the_steps_group_ends_it():
    s = _state()
    t = T0 + 40.0
    s.apply(nf.NeffCacheLog(t=t, path="/run/torchneuron.log", misses=12, stores=11))
    s.apply(nf.NeffCacheLog(t=t + 0.3, path="/run/torchneuron.log", misses=5, stores=6))
    assert s.phase(now=t + 0.7) == ("compiling", "compiling NEFFs at step 20: 17 so far, 0:00.7")
    s.apply(nf.NeffCompiles(t=t + 0.8, pid=PID, step=20, count=17, duration_s=0.68, input_shapes=[[8, 16]]))
    assert s.phase(now=t + 1.0)[0] == "running"
    (group,) = _groups(s)
    assert (group.step, group.count, group.cause, group.previous_shapes) == (20, 17, "shape-change", [[4, 16]])
    assert s.parts.compiles.compile_count == 17 and s.recompiles_after_warmup == 1


def test_a_step_whose_shapes_were_seen_compiles_a_new_op_and_graph_neffs_make_no_group():
    s = _state(steps=8)
    s.apply(nf.NeffCompiles(t=T0 + 30, pid=PID, step=8, count=3, duration_s=0.1, input_shapes=[[4, 16]]))
    s.apply(nf.NeffCompiles(t=T0 + 31, pid=PID, step=9, count=0, graphs=2, duration_s=0.0))
    (group,) = _groups(s)
    assert group.cause == "new-op" and not group.recompile and group.name == "3 NEFFs"
    assert s.parts.neff.cache().graph_neffs == 2 and s.parts.compiles.compile_count == 3


def test_the_same_steps_neffs_on_two_ranks_are_one_row_counted_once():
    s = _state(steps=0, pids=(100, 101))
    for pid in (100, 101):
        s.apply(nf.NeffCompiles(t=T0 + 5, pid=pid, step=0, count=19, duration_s=0.2, input_shapes=[[4, 16]]))
    (group,) = _groups(s)
    assert group.ranks == [0, 1] and group.cause == "first"
    assert s.parts.compiles.compile_count == 19 and s.compile_total_s == 0.2


def test_a_graph_from_get_dynamo_metrics_and_from_the_table_is_one_record_the_table_filling_its_time():
    s = _state(steps=2)
    s.apply(ev.CompileFinished(t=T0 + 3, source="dynamo", pid=PID, step=0, duration_s=2.0, point="dynamo@0:x"))
    s.apply(dev.NeuronGraphStat(t=T0 + 3.1, path="get_dynamo_metrics", row=0, graph_id="g1", graph_name="fwd",
                                node_count=23, timestamp=T0 + 3.1, fx_passes_s=0.1, lower_s=0.2, compile_s=None))
    s.apply(dev.NeuronGraphStat(t=T0 + 50, path="/run/neuron-metrics/metric_table_graph_stats_rank0.csv", row=0,
                                rank=0, graph_id="g1", graph_name="fwd", node_count=23, timestamp=T0 + 3.1,
                                fx_passes_s=0.1, lower_s=0.2, compile_s=1.5))
    joined = s.parts.telemetry.graph_stats
    (split,) = joined.splits_for(1)
    assert split.compile_s == 1.5 and split.node_count == 23
    assert joined.unjoined_rows == 0 and s.parts.compiles.compile_count == 1


def test_the_first_step_is_cold_when_neffs_compiled_in_it_and_warm_when_the_disk_served_them():
    cold = _state(steps=0)
    cold.apply(nf.NeffCompiles(t=T0 + 5, pid=PID, step=0, count=19, duration_s=0.2, input_shapes=[[4, 16]]))
    cold.apply(ev.StepEnded(t=T0 + 6, pid=PID, step=0, duration_s=0.5, compiles=19))
    warm = _state(steps=0)
    warm.apply(nf.NeffCacheTotals(t=T0 + 4, pid=PID, step=0, disk_hits=19, memory_misses=19))
    warm.apply(ev.StepEnded(t=T0 + 4, pid=PID, step=0, duration_s=0.5))
    c, w = run_figures(cold, now=T0 + 10), run_figures(warm, now=T0 + 10)
    assert (c.ttfi_s, c.ttfi_cache) == (6.0, "cold") and (w.ttfi_s, w.ttfi_cache) == (4.0, "warm")
    unknown = run_figures(_state(steps=1), now=T0 + 20)
    assert unknown.ttfi_s == 10.0 and unknown.ttfi_cache is None  # no cache said anything


def test_a_group_the_pipeline_finished_a_step_later_names_the_step_that_waited():
    s = _state(steps=22)
    s.apply(nf.NeffCompiles(t=T0 + 40, pid=PID, step=20, count=14, duration_s=0.7, input_shapes=[[8, 16]],
                            finished_step=21, after_step_s=0.62))
    s.apply(nf.NeffCompiles(t=T0 + 41, pid=PID, step=21, count=3, duration_s=0.1, input_shapes=[[2, 16]],
                            finished_step=21, after_step_s=0.0))  # finished in its own step: nothing waited
    later, own = _groups(s)[-2:]
    assert later.reason.endswith("; the pipeline finished them 0.62 s after step 20 ended: step 21 waited for them")
    assert "waited" not in own.reason


def test_a_probe_message_with_an_impossible_wait_is_refused():
    from neurondesk.collectors.probe_messages import out_of_range

    bad = nf.NeffCompiles(t=T0 + 40, pid=PID, step=20, count=1, finished_step=21, after_step_s=-1.0)
    assert "after_step_s" in out_of_range(bad, T0 + 41, T0)
    assert out_of_range(nf.NeffCompiles(t=T0 + 40, pid=PID, step=20, count=1, finished_step=-3), T0 + 41, T0)
