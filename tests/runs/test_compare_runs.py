"""On real runs of the demo workload: `neurondesk compare` (XLA on the CPU against eager on the CPU,
same seed and data), the precision-mismatch warning, and the `--check` CI gate's exit statuses.

Five short real runs in all (module fixtures): XLA demo (under --check: the clean run), eager demo,
eager bf16 demo, an XLA --dynamic-shape run (fails --max-recompiles-after-warmup 0) and an eager
run that crashes (its own exit status wins over the failed checks).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest
from conftest import REPO, base_env, needs_xla, neurondesk_run

DEMO = ["--preset", "demo", "--steps", "20", "--log-every", "1"]
TINY = ["--preset", "demo", "--num-layers", "1", "--d-model", "32", "--nhead", "2", "--dim-feedforward", "64",
        "--vocab", "100"]
CLEAN_GATE = ["--check", "--max-recompiles-after-warmup", "0", "--loss-finite", "--max-first-compile-s", "600",
              "--min-samples-per-s", "0.1"]


@pytest.fixture(scope="module")
def xla(tmp_path_factory):
    return neurondesk_run(tmp_path_factory.mktemp("xla"), DEMO, CLEAN_GATE)


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    return neurondesk_run(tmp_path_factory.mktemp("eager"), [*DEMO, "--device", "cpu"])


@pytest.fixture(scope="module")
def eager_bf16(tmp_path_factory):
    return neurondesk_run(tmp_path_factory.mktemp("bf16"), [*DEMO, "--device", "cpu", "--precision", "bf16"])


def compare(*args: str, home=None) -> subprocess.CompletedProcess:
    env = base_env(home or REPO / "build-nonexistent-home")
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", "compare", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)


def row(c: dict, key: str) -> list:
    return next(r for r in c["rows"] if r["key"] == key)["values"]


@needs_xla
def test_compare_xla_against_eager_on_the_same_data(xla, eager, tmp_path):
    assert xla.returncode == 0, xla.stderr[-2000:]
    assert eager.returncode == 0, eager.stderr[-2000:]
    a, b = xla.summary, eager.summary
    # both reach a loss a little above the higher of the two last losses
    target = round(max(a["loss"]["last"], b["loss"]["last"]) + 0.05, 3)
    p = compare(xla.run_dir, eager.run_dir, "--target-loss", target, "--format", "json", home=tmp_path)
    assert p.returncode == 0, p.stderr
    c = json.loads(p.stdout)
    assert c["target_loss"] == target
    assert [r["run_id"] for r in c["runs"]] == ["run", "run"] and [r["label"] for r in c["runs"]] == ["A", "B"]
    # same seed, batch, sequence length, lr, data order and precision: nothing to warn about
    assert c["warnings"] == []
    assert row(c, "device")[0].startswith("xla-cpu") and row(c, "device")[1].startswith("cpu")
    assert row(c, "step_time_s") == [a["steady"]["step_time_s"], b["steady"]["step_time_s"]]
    assert row(c, "samples_per_s") == [a["steady"]["samples_per_s"], b["steady"]["samples_per_s"]]
    assert row(c, "tokens_per_s") == [a["steady"]["tokens_per_s"], b["steady"]["tokens_per_s"]]
    first, total = row(c, "first_compile_s"), row(c, "compile_total_s")
    assert first[0] > 0 and total[0] >= first[0]  # XLA compiles...
    assert first[1] is None and total[1] == 0  # ...eager does not
    assert row(c, "price_per_hour") == [1.34375, 1.34375]
    assert all("VAN-2601" in s for s in row(c, "price_source"))
    # both reached the target: steps, time and cost to it are known and consistent
    steps, times, costs = row(c, "steps_to_target"), row(c, "time_to_target_s"), row(c, "cost_to_target_usd")
    assert all(isinstance(n, int) and 1 <= n <= 20 for n in steps)
    for t, usd in zip(times, costs, strict=True):
        assert t > 0 and usd == pytest.approx(1.34375 / 3600 * t, rel=1e-6)
    assert times[0] > first[0]  # XLA's time to target includes its compile
    assert row(c, "mfu") == [None, None]  # CPU runs have no peak FLOPS
    # ranked on cost to target: cheaper first
    order = c["ranking"]["order"]
    assert c["ranking"]["basis"] == "cost_to_target_usd" and sorted(order) == ["A", "B"]
    cheaper = "A" if costs[0] < costs[1] else "B"
    assert order[0] == cheaper and c["verdict"].startswith(f"{cheaper} ranks first on cost to loss {target:g}")
    # payback of XLA's compile against eager's none, from the two step times
    (pay,) = [e for e in c["payback"] if e["run"] == "A"]
    assert pay["against"] == "B" and pay["extra_compile_s"] == pytest.approx(total[0])
    saved = b["steady"]["step_time_s"] - a["steady"]["step_time_s"]
    assert pay["steps"] == (math.ceil(total[0] / saved) if saved > 0 else None)
    assert all(e["run"] != "B" for e in c["payback"])  # eager compiles nothing: nothing to pay back

    md = compare(xla.run_dir, eager.run_dir, "--target-loss", target, home=tmp_path).stdout
    assert "| | A: run | B: run |" in md and "| steady step time (median) |" in md
    assert f"| cost to loss {target:g} |" in md and "**Verdict:** " + c["verdict"] in md
    assert "WARNING" not in md
    csv_out = compare(xla.run_dir, eager.run_dir, "--format", "csv", home=tmp_path).stdout.splitlines()
    assert csv_out[0] == "metric,A:run,B:run"
    # eager compiles nothing: its compile seconds are 0 (a float since a summary's seconds are floats)
    assert any(re.match(r"compile_total_s,[^,]*,0(\.0+)?$", line) for line in csv_out), csv_out


@needs_xla
def test_compare_unreached_target_ranks_nobody_on_cost_to_target(xla, eager, tmp_path):
    low = min(xla.summary["loss"]["last"], eager.summary["loss"]["last"]) - 2.0
    c = json.loads(compare(xla.run_dir, eager.run_dir, "--target-loss", low, "--format", "json",
                           home=tmp_path).stdout)
    assert row(c, "cost_to_target_usd") == [None, None]
    assert c["ranking"]["basis"] == "per_1k_steps_steady_usd"  # falls back, says so
    assert c["verdict"].startswith(f"no run reached loss {low:g}; ")


@needs_xla
def test_compare_warns_loudly_when_precision_differs(eager, eager_bf16, tmp_path):
    assert eager_bf16.returncode == 0, eager_bf16.stderr[-2000:]
    assert eager_bf16.summary["precision"] != eager.summary["precision"]
    p = compare(eager.run_dir, eager_bf16.run_dir, "--format", "json", home=tmp_path)
    c = json.loads(p.stdout)
    loud = [w for w in c["warnings"] if w["level"] == "loud"]
    assert len(loud) == 1 and loud[0]["message"].startswith("PRECISION DIFFERS (A fp32, B bf16")
    assert not [w for w in c["warnings"] if w["level"] == "warn"]  # same batch, seq len, lr, seed, data
    assert c["verdict"].startswith("NOT LIKE FOR LIKE (precision differs): ")
    md = compare(eager.run_dir, eager_bf16.run_dir, home=tmp_path).stdout
    assert md.splitlines()[2].startswith("> **WARNING: PRECISION DIFFERS")  # above the table


@needs_xla
def test_check_gate_passes_a_clean_run(xla):
    assert xla.returncode == 0, xla.stderr[-2000:]
    assert "neurondesk check failed" not in xla.stderr
    assert ("neurondesk check passed: steps ran, recompiles after warm-up <= 0, loss finite, "
            "first compile <= 600 s, samples/s >= 0.1") in xla.stderr


@needs_xla
def test_check_gate_fails_a_dynamic_shape_run_with_status_3(tmp_path):
    run = neurondesk_run(tmp_path, [*TINY, "--seq-len", "16", "--steps", "10", "--dynamic-shape", "--log-every", "1"],
                         ["--warmup-steps", "3", "--check", "--max-recompiles-after-warmup", "0", "--loss-finite",
                          "--min-samples-per-s", "1e9"])
    s = run.summary  # still written
    assert s["exit_code"] == 0 and s["recompiles_after_warmup"] > 0
    assert run.returncode == 3, run.stderr[-2000:]
    failed = [ln for ln in run.stderr.splitlines() if ln.startswith("neurondesk check failed: ")]
    assert len(failed) == 2, failed  # recompiles and samples/s; the loss stayed finite
    assert failed[0].startswith(f"neurondesk check failed: {s['recompiles_after_warmup']} recompile(s) after "
                                "warm-up (training step >= 3, or an evaluation after the first), max 0: step ")
    assert "shape-change" in failed[0]
    assert "samples/s" in failed[1] and "1e+09" in failed[1]
    assert "check passed" not in run.stderr


@needs_xla
def test_check_gate_keeps_the_workloads_own_failure_status(tmp_path):
    run = neurondesk_run(tmp_path, [*TINY, "--device", "cpu", "--steps", "10", "--crash-at-step", "3", "--no-loader",
                                    "--log-every", "1"], ["--check", "--loss-finite"])
    assert run.summary["exit_code"] == 1
    assert run.returncode == 1  # the crash's status, not 3
    assert "neurondesk check failed: ran 2 of 10 requested steps" in run.stderr


def test_compare_refuses_a_folder_without_a_run(tmp_path):
    p = compare(tmp_path, tmp_path, home=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [f"neurondesk: run '{tmp_path}' not found: give a run folder "
                                             "(holding events.jsonl) or a run id from `neurondesk history`"]
