"""Frameworks run as they come (workloads/frameworks/). A stock Hugging Face Trainer run (a tiny
GPT-2 from a config, nothing downloaded) under `neurondesk run --headless`, eager and with torch_compile, against the
truth Trainer's own log history gives: the optimizer steps, the logged losses (not Trainer's run
average), its own train_samples_per_second as the script's figure, every evaluation a phase of its
own (the in-training one at the last step and the final evaluate() back to back), nothing of
evaluation in the training samples. A stock Lightning fit with validation, then test and predict:
each stage its own phase."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import REAL_RUN_TIMEOUT_S, REPO, Run, base_env

SCRIPT = REPO / "workloads" / "frameworks" / "hf_trainer.py"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed; `make test` installs it ([test] extra)")


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch_compile"])
def test_a_stock_trainer_run_is_counted_as_trainer_counts_it(tmp_path, compiled):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1", "--run-dir",
           str(run_dir), "--", sys.executable, str(SCRIPT), *(["--compile"] if compiled else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path), cwd=REPO)
    run = Run(p.returncode, p.stdout, p.stderr, run_dir)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in (run_dir / "stdout.log").read_text().splitlines() if x.startswith("pattern-truth: "))
    truth = json.loads(line.split(": ", 1)[1])
    s = run.summary
    assert s["steps"] == truth["steps"]
    losses = [e["value"] for e in run.events if e["kind"] == "loss"]
    assert losses == truth["logged_losses"]  # the final {'train_loss': ...} and the metrics table are not losses
    assert s["loss"]["last"] == truth["logged_losses"][-1]
    rate = s["script_throughput"]
    assert (rate["unit"], rate["value"]) == ("samples/s", truth["samples_per_second_said"])
    assert "\r" not in rate["line"]
    phases = [e["batches"] for e in run.events if e["kind"] == "eval_phase"]
    assert phases == [truth["eval_batches_each"]] * truth["eval_phases"]
    steps = [e for e in run.events if e["kind"] == "step"]
    assert sum(e.get("samples", 0) for e in steps) == truth["steps"] * 4  # no evaluation batch in a step
    assert s["recompiles_after_warmup"] == 0


def test_a_stock_lightning_fit_test_predict_run_has_each_stage_as_its_own_phase(tmp_path):
    if importlib.util.find_spec("lightning") is None:
        pytest.skip("lightning is not installed; `make test` installs it (workload extra)")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1", "--run-dir",
           str(run_dir), "--", sys.executable, str(REPO / "workloads" / "frameworks" / "lightning_fit.py")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path), cwd=REPO)
    run = Run(p.returncode, p.stdout, p.stderr, run_dir)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in (run_dir / "stdout.log").read_text().splitlines() if x.startswith("pattern-truth: "))
    truth = json.loads(line.split(": ", 1)[1])
    assert run.summary["steps"] == truth["steps"]
    # validation after each epoch, then test, then predict: four phases, never merged
    assert [e["batches"] for e in run.events if e["kind"] == "eval_phase"] == truth["eval_batches"]
    steps = [e for e in run.events if e["kind"] == "step"]
    assert sum(e.get("samples", 0) for e in steps) == truth["train_samples"]
    rate = run.summary["script_throughput"]
    assert rate is None or "Predicting" not in rate["line"] and "Testing" not in rate["line"]
