"""The patterns of real training scripts (workloads/patterns/, see its README), each run under
`neurondesk run --headless` on the real XLA CPU backend (or eager torch.compile), against the
truth the script prints itself (`pattern-truth: {...}`: its own counts and torch_xla's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REAL_RUN_TIMEOUT_S, REPO, Run, base_env, needs_xla

PATTERNS = REPO / "workloads" / "patterns"


def run_pattern(tmp_path, script: str, *nd_args: str) -> tuple[Run, dict]:
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), *nd_args,
           "--", sys.executable, str(PATTERNS / script)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path), cwd=PATTERNS)
    lines = [x for x in p.stdout.splitlines() if x.startswith("pattern-truth: ")]
    assert lines, p.stdout[-2000:] + p.stderr[-2000:]
    return Run(p.returncode, p.stdout, p.stderr, run_dir), json.loads(lines[-1].split(": ", 1)[1])


@pytest.fixture(scope="module")
def eval_every(tmp_path_factory):
    return run_pattern(tmp_path_factory.mktemp("eval"), "eval_every.py", "--check", "--max-recompiles-after-warmup", "0")


@needs_xla
def test_evaluation_batches_are_not_training_samples(eval_every):
    run, truth = eval_every
    s = run.summary
    assert s["steps"] == truth["steps"]
    trained = [e for e in run.events if e["kind"] == "step"]
    assert sum(e["samples"] for e in trained) == truth["train_samples"]  # no eval batch among them
    ev = s["evaluation"]
    assert (ev["phases"], ev["batches"]) == (truth["eval_phases"], truth["eval_batches"])
    assert ev["time_s"] > 0 and "evaluation (not in throughput)" in run.stdout


@needs_xla
def test_first_compiles_of_evaluation_are_not_recompiles_and_the_check_passes(eval_every):
    run, truth = eval_every
    s = run.summary
    assert s["compile_count"] == truth["compiles"]
    assert {c["phase"] for c in s["compiles"]} == {"train", "eval"}
    assert s["recompiles_after_warmup"] == 0
    assert run.returncode == 0 and "neurondesk check passed" in run.stderr
    steady = s["steady"]["steps"]
    assert steady == truth["steps"] - s["warmup_steps"]  # an evaluation's compile leaves its step steady


@needs_xla
def test_a_step_closure_reading_item_inside_the_loaders_sync_is_one_compile_not_two(tmp_path):
    run, truth = run_pattern(tmp_path, "step_closure_item.py")
    s = run.summary
    assert (s["steps"], s["compile_count"]) == (truth["steps"], truth["compiles"])
    assert all(c["duration_s"] is not None for c in s["compiles"])  # no phantom without a duration


@needs_xla
def test_a_setup_sync_before_the_loop_is_not_a_step(tmp_path):
    run, truth = run_pattern(tmp_path, "broadcast_before_loop.py")
    assert run.summary["steps"] == truth["steps"]
    assert run.summary["precision"] == "fp32"  # the setup sync saw the device first; the optimizer gives precision
    assert [e["step"] for e in run.events if e["kind"] == "step"] == list(range(truth["steps"]))


@needs_xla
def test_the_recompile_storm_is_named_every_step_counted_and_the_check_fails(tmp_path):
    run, truth = run_pattern(tmp_path, "lazy_never_cut.py", "--check")
    s = run.summary
    assert s["steps"] == truth["steps"]  # the last step too, which no sync ended
    assert s["compile_count"] == truth["compiles"]
    kinds = {d["kind"]: d for d in s["diagnostics"]}
    grows = kinds["graph-grows"]
    assert "call torch_xla.sync()" in grows["message"] and grows["location"].endswith("lazy_never_cut.py:23")
    assert "no steady state" in kinds["no-steady-state"]["message"]
    assert run.returncode == 3 and "neurondesk check failed: the graph grows every step" in run.stderr
    assert "the graph grows every step" in (run.run_dir / "summary.md").read_text()


def test_torch_compile_first_called_in_evaluation_script_output_is_its_own(tmp_path):
    alone = subprocess.run([sys.executable, str(PATTERNS / "compiled_eval_first.py")], capture_output=True,
                           text=True, timeout=REAL_RUN_TIMEOUT_S, cwd=PATTERNS, env=base_env(tmp_path))
    run, truth = run_pattern(tmp_path, "compiled_eval_first.py")
    assert alone.returncode == 0 and run.returncode == 0
    assert (run.run_dir / "stderr.log").read_text() == alone.stderr  # no warning of ours (global hooks)
    s = run.summary
    assert s["steps"] == truth["steps"]
    assert [(c["phase"], c["cause"]) for c in s["compiles"]][:2] == [("eval", "first"), ("train", "first")]
    assert s["recompiles_after_warmup"] == 0
    assert all(c["location"] and c["location"].endswith(".py:" + c["location"].rsplit(":", 1)[1])
               for c in s["compiles"])


def _steps_and_phases(run: Run) -> tuple[list[dict], list[dict]]:
    return ([e for e in run.events if e["kind"] == "step"], [e for e in run.events if e["kind"] == "eval_phase"])


def test_evaluation_of_the_module_inside_torch_compiles_wrapper_is_its_own_phase(tmp_path):
    # Trainer / accelerate with torch_compile: training through OptimizedModule, evaluation on the module in it
    run, truth = run_pattern(tmp_path, "compiled_train_plain_eval.py")
    steps, phases = _steps_and_phases(run)
    assert run.returncode == 0 and len(steps) == truth["steps"]
    assert sum(e["samples"] for e in steps) == truth["train_samples"]  # no evaluation batch in a step
    assert (len(phases), sum(e["batches"] for e in phases)) == (truth["eval_phases"], truth["eval_batches"])
    ev = run.summary["evaluation"]
    assert (ev["phases"], ev["batches"]) == (truth["eval_phases"], truth["eval_batches"])


def test_a_loop_with_no_optimizer_steps_at_each_backward_and_knows_its_device(tmp_path):
    # pytorch/examples' word_language_model: loss.backward(), then p.data.add_(p.grad, alpha=-lr)
    run, truth = run_pattern(tmp_path, "manual_sgd_no_optimizer.py")
    steps, phases = _steps_and_phases(run)
    assert run.returncode == 0
    assert run.summary["steps"] == truth["steps"] == len(steps)  # the last one ends with the process
    assert sum(e["samples"] for e in steps) == truth["train_samples"]
    assert run.summary["device"]["kind"] == "cpu"
    assert [e["batches"] for e in phases] == [truth["eval_batches"]]  # eval() + no_grad is evaluation


def test_sequence_first_batches_count_the_batch_dimension_not_the_time_steps(tmp_path):
    # an LSTM (batch_first=False) fed [35, 20]: 20 samples a step, 700 tokens
    run, truth = run_pattern(tmp_path, "sequence_first_lstm.py")
    steps, _ = _steps_and_phases(run)
    assert run.returncode == 0 and len(steps) == truth["steps"]
    assert sum(e["samples"] for e in steps) == truth["train_samples"]
    assert sum(e.get("tokens", 0) for e in steps) == truth["train_tokens"]
    assert all(e["input_shapes"] == [[35, 20]] for e in steps)


@needs_xla
def test_a_compile_outside_any_wrapped_sync_is_counted_compiles_equal_torch_xlas(tmp_path):
    # Trainer's logging step: a collective-style _xla_sync_multi and xm.mesh_reduce inside the step
    run, truth = run_pattern(tmp_path, "mesh_reduce_logging.py")
    s = run.summary
    assert run.returncode == 0 and s["steps"] == truth["steps"]
    assert s["compile_count"] == truth["compiles"]
    assert s["recompiles_after_warmup"] == 0


def test_back_to_back_evaluations_are_phases_of_their_own(tmp_path):
    run, truth = run_pattern(tmp_path, "back_to_back_eval.py")
    _steps, phases = _steps_and_phases(run)
    assert run.returncode == 0
    assert [e["batches"] for e in phases] == truth["eval_batches"]
    assert run.summary["evaluation"]["phases"] == truth["eval_phases"]
