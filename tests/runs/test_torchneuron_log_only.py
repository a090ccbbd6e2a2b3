"""Every TorchNeuron NEFF figure from more than one source (issue 50 item 3): with TorchNeuron's metrics
off (TORCH_NEURONX_METRICS_ENABLED=0, the user's choice) or a ``torch_neuronx.metrics`` without the
functions the probe calls (the double's TORCHNEURON_DOUBLE_METRICS=renamed), the NEFF compiles, their
step and cause come from TorchNeuron's NEFF cache log. Real `neurondesk run`s under torch 2.13 with the
TorchNeuron double; the script writes the double's own count of the NEFFs it compiled after each step."""

from __future__ import annotations

import json

import pytest
from torch213 import SCRIPTS, compare_runs, run_torchneuron, torchneuron_env

SCRIPT = SCRIPTS / "eager_no_metrics.py"
COMPILE_S = "0.3"  # each NEFF's compile in the double: the cold run's 19 first NEFFs (5.7 s) outweigh a busy machine


def _groups(summary: dict) -> list[dict]:
    return [c for c in summary["compiles"] if c["source"] == "torchneuron"]


def _expected(truth: list[dict]) -> list[tuple[int, int]]:
    """(step, NEFFs compiled in it), as the double counted them."""
    before = [0] + [row["compiles"] for row in truth[:-1]]
    return [(row["step"], row["compiles"] - b) for row, b in zip(truth, before, strict=True) if row["compiles"] - b]


@pytest.fixture(scope="module")
def metrics_off(tmp_path_factory):
    """A cold and a warm run on one NEFF cache folder, TorchNeuron's metrics off."""
    home = tmp_path_factory.mktemp("torchneuron-log-only")
    env = torchneuron_env(home, TORCH_NEURONX_METRICS_ENABLED="0", TORCHNEURON_DOUBLE_COMPILE_S=COMPILE_S)
    runs = []
    for name in ("cold", "warm"):
        truth = home / f"{name}-truth.json"
        run = run_torchneuron(home / name, SCRIPT, [str(truth)], env)
        assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
        runs.append((run, json.loads(truth.read_text())))
    return runs


def _held_to_truth(summary: dict, truth: list[dict]) -> None:
    groups = _groups(summary)
    assert [(g["step"], g["count"]) for g in groups] == _expected(truth)
    assert [g["step"] for g in groups] == [0, 20]  # the batch size changes at step 20: placed there
    first, change = groups
    assert first["cause"] == "first" and change["cause"] == "shape-change"
    assert change["input_shapes"] == [[8, 16]] and change["previous_shapes"] == [[4, 16]] and change["recompile"]
    assert summary["compile_count"] == truth[-1]["compiles"] > 0
    # the log gives no seconds: said unknown, never 0
    assert all(g["duration_s"] is None for g in groups) and "seconds unknown" in change["reason"]
    assert summary["compile_total_s"] is None and summary["figures"]["compile_total_s"] is None
    neff = summary["neuron"]["neff_cache"]
    assert neff["compiles"] == neff["log_misses"] == truth[-1]["compiles"]
    assert neff["compile_s"] is None and neff["counted_from"] == "log" and neff["disagreement"] is None


def test_metrics_off_the_log_counts_the_compiles_at_their_step_and_the_notice_says_why(metrics_off):
    (run, truth), _ = metrics_off
    _held_to_truth(run.summary, truth)
    (notice,) = [n for n in run.summary["notices"] if "TorchNeuron's metrics" in n]
    assert "TORCH_NEURONX_METRICS_ENABLED is '0'" in notice and "counted from TorchNeuron's NEFF cache log" in notice
    assert "33 compiles (seconds unknown)" in run.stderr or "compiles (seconds unknown)" in run.stderr


def test_metrics_off_the_cold_and_the_warm_first_step_are_labelled(metrics_off):
    (cold, _), (warm, warm_truth) = metrics_off
    assert warm_truth[-1]["compiles"] == 0 and _groups(warm.summary) == []
    assert cold.summary["figures"]["ttfi_cache"] == "cold" and warm.summary["figures"]["ttfi_cache"] == "warm"
    assert warm.summary["neuron"]["neff_cache"]["log_hits"] > 0


def test_metrics_off_compare_of_the_cold_and_warm_runs_has_its_cache_section(metrics_off, tmp_path):
    (cold, _), (warm, _) = metrics_off

    def compare(fmt: str) -> str:
        return compare_runs(cold.run_dir, warm.run_dir, fmt, tmp_path)

    (saved,) = json.loads(compare("json"))["cache_saved"]
    assert (saved["run"], saved["against"]) == ("B", "A")
    assert saved["saved_s"] == pytest.approx(cold.summary["figures"]["ttfi_s"] - warm.summary["figures"]["ttfi_s"])
    assert saved["compile_saved_s"] is None  # the cold run's compile seconds are unknown, not 0
    text = compare("md")
    assert "## Compile cache" in text and "compile seconds of the whole run unknown" in text


def test_a_metrics_module_without_the_probes_functions_the_log_counts_the_compiles(tmp_path):
    env = torchneuron_env(tmp_path, TORCHNEURON_DOUBLE_METRICS="renamed", TORCHNEURON_DOUBLE_COMPILE_S="0.05")
    truth = tmp_path / "truth.json"
    run = run_torchneuron(tmp_path / "run", SCRIPT, [str(truth)], env)
    assert run.returncode == 0, run.stderr[-3000:]
    _held_to_truth(run.summary, json.loads(truth.read_text()))
    (notice,) = [n for n in run.summary["notices"] if "TorchNeuron's metrics" in n]
    assert "torch_neuronx.metrics has no get_counter_value, get_metric_data" in notice
    assert "TORCH_NEURONX_METRICS_ENABLED" not in notice  # it was on: the notice names what was missing
