"""A TRL SFTTrainer + PEFT LoRA fine-tune (workloads/frameworks/trl_sft_lora.py: a tiny GPT-2 from a
config, a tokenizer built locally, nothing downloaded) under `neurondesk run --headless`, eager CPU,
with the libraries `pip install trl` brings today (transformers 5.x, which prints its logged values
quoted: issue 50 item 1): the last loss is the last loss Trainer logged and the script's own
throughput is its train_samples_per_second, both as Trainer.log recorded them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REAL_RUN_TIMEOUT_S, REPO, Run, base_env

pytestmark = [pytest.mark.latest, pytest.mark.latest_only]


def test_a_trl_sft_lora_run_has_its_logged_last_loss_and_its_own_throughput(tmp_path):
    for package in ("trl", "peft", "datasets"):
        pytest.importorskip(package, reason=f"{package} is installed by the latest lane only (latest_only)")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1", "--run-dir",
           str(run_dir), "--", sys.executable, str(REPO / "workloads" / "frameworks" / "trl_sft_lora.py")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path), cwd=REPO)
    run = Run(p.returncode, p.stdout, p.stderr, run_dir)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in (run_dir / "stdout.log").read_text().splitlines() if x.startswith("pattern-truth: "))
    truth = json.loads(line.split(": ", 1)[1])
    s = run.summary
    assert s["steps"] == truth["steps"]
    assert (s["loss"]["first"], s["loss"]["last"]) == (truth["logged_losses"][0], truth["logged_losses"][-1])
    recorded = [e["value"] for e in run.events if e["kind"] == "loss" and e.get("source") == "transformers"]
    assert recorded == truth["logged_losses"]  # once each: the printed '2.532' copies are not counted
    rate = s["script_throughput"]
    assert (rate["unit"], rate["value"], rate["printed"]) == ("samples/s", truth["samples_per_second_said"], 1)
    assert rate["figure"] == "run average"
