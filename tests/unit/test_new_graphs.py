"""A graph first compiled at a point after warm-up is a new graph, not a recompile (Trainer's first
logging step: `--max-recompiles-after-warmup 0` passes a stock Trainer run); a point that compiles
graph after graph (Trainer's evaluation concatenating results on the device) is named, with the
fix, because on Neuron each of them is a compile wall."""

from __future__ import annotations

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.checks import Thresholds, evaluate
from neurondesk.core.summary.build import run_summary

TRAIN_POINT, EVAL_POINT = "sync@run_clm.py:652", "sync@trainer.py:4675"


def _compile(t: float, step: int, point: str, phase: str = "train", shapes=((8, 128),)) -> ev.CompileFinished:
    return ev.CompileFinished(t=t, source="probe", pid=1, step=step, duration_s=0.5, point=point,
                              location=point.split("@")[1], trigger="sync", phase=phase,
                              input_shapes=[list(s) for s in shapes])


def _trainer_run(eval_graphs: int) -> RunState:
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "run_clm.py"], warmup_steps=2))
    t = 1.0
    for step in range(12):
        if step in (0, 1, 5):  # the first, the optimizer's second-step graph, the first logging step's
            t += 0.5
            st.apply(_compile(t, step, TRAIN_POINT))
        t += 0.1
        st.apply(ev.StepEnded(t=t, pid=1, step=step, duration_s=0.1, samples=8))
        if step == 8:
            for _ in range(eval_graphs):  # a growing concatenation: a new graph per batch
                t += 0.5
                st.apply(_compile(t, step, EVAL_POINT, phase="eval"))
            st.apply(ev.EvalPhase(t=t, pid=1, step=step, duration_s=eval_graphs * 0.5, batches=eval_graphs))
    return st


def test_the_first_logging_steps_graph_is_a_new_graph_and_the_check_passes():
    s = run_summary(_trainer_run(eval_graphs=2), now=30.0)
    assert [c.cause for c in s.compiles if c.phase == "train"] == ["first", "new-graph", "new-graph"]
    assert s.recompiles_after_warmup == 0
    assert not any("recompile" in f for f in evaluate(s, Thresholds(max_recompiles_after_warmup=0)))
    assert not [d for d in s.diagnostics if d.kind == "many-graphs"]


def test_a_point_compiling_graph_after_graph_is_named_with_trainers_fix():
    s = run_summary(_trainer_run(eval_graphs=24), now=60.0)
    many = [d for d in s.diagnostics if d.kind == "many-graphs"]
    assert len(many) == 1
    assert many[0].message.startswith("24 graphs compiled at trainer.py:4675 during evaluation (12.0 s in all)")
    assert "eval_accumulation_steps" in many[0].message and "compile wall" in many[0].message
