"""TorchNeuron's eager NEFF compiles, its persistent NEFF cache and the time to first step (issue 44
items 1-3, 5, 8): real `neurondesk run`s of a TorchNeuron-shaped eager script under torch 2.13, the
TorchNeuron double (tests/torchneuron_double/) playing the documented signals on the CPU. The script
writes what TorchNeuron counted after each step; neurondesk's figures are held to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch213 import SCRIPTS, run_alone, run_torchneuron, torchneuron_env

EAGER = SCRIPTS / "eager_shapes.py"
# Seconds each NEFF compile takes in the double for the cold/warm pair: the 19 NEFFs of the first
# step (7.6 s) dwarf what two starts of the same interpreter differ by on a busy machine.
COLD_COMPILE_S = "0.4"


def _neff_groups(summary: dict) -> list[dict]:
    return [c for c in summary["compiles"] if c["source"] == "torchneuron"]


@pytest.fixture(scope="module")
def cold_and_warm(tmp_path_factory):
    """Two runs of the eager script on one NEFF cache folder: the first compiles, the second finds all."""
    home = tmp_path_factory.mktemp("torchneuron")
    env = torchneuron_env(home, TORCHNEURON_DOUBLE_COMPILE_S=COLD_COMPILE_S)
    runs = []
    for name in ("cold", "warm"):
        truth = home / f"{name}-truth.json"
        run = run_torchneuron(home / name, EAGER, [str(truth)], env)
        assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
        runs.append((run, json.loads(truth.read_text())))
    return runs


def test_eager_neffs_are_counted_per_step_and_cause_as_torchneuron_counted_them(cold_and_warm):
    (run, truth), _ = cold_and_warm
    summary = run.summary
    compiled = {row["step"]: row["compiles"] - (truth[i - 1]["compiles"] if i else 0) for i, row in enumerate(truth)}
    expected = [(step, n) for step, n in compiled.items() if n]
    groups = _neff_groups(summary)
    assert [(g["step"], g["count"]) for g in groups] == expected  # none at step 25, where the shape comes back
    assert [g["step"] for g in groups] == [0, 20]
    first, change = groups
    assert first["cause"] == "first" and first["input_shapes"] == [[4, 16]] and not first["recompile"]
    assert change["cause"] == "shape-change" and change["input_shapes"] == [[8, 16]]
    assert change["previous_shapes"] == [[4, 16]] and change["recompile"]
    assert change["name"] == f"{change['count']} NEFFs"
    # compile_count and compile_total_s count NEFFs and their seconds, as TorchNeuron did
    assert summary["compile_count"] == truth[-1]["compiles"]
    assert summary["compile_total_s"] == pytest.approx(truth[-1]["seconds"], rel=0.3)
    assert summary["neuron"]["neff_cache"]["compiles"] == truth[-1]["compiles"]
    assert summary["recompiles_after_warmup"] == 1  # one group: step 20's, not its 14 NEFFs
    # compile time is the compile slice, never in the steady steps' split: steps 0 and 20 are not steady
    breakdown = {s["name"]: s["seconds"] for s in summary["time_breakdown"]}
    assert breakdown["compile"] == pytest.approx(summary["compile_total_s"], abs=0.01)
    assert summary["steady"]["steps"] == len(truth) - 5 - 1


def test_the_device_is_torchneurons_neuron_with_its_version_and_cores(cold_and_warm):
    (run, _), _ = cold_and_warm
    device = run.summary["device"]
    assert device["kind"] == "neuron" and device["framework"] == "TorchNeuron"
    assert device["framework_version"] == "2.13.3.0+double" and device["cores"] == 2
    assert "TorchNeuron 2.13.3.0+double, 2 NeuronCores" in device["name"]
    assert "TorchNeuron 2.13.3.0+double" in run.stdout  # the headless summary says it
    assert "trainium2" in run.summary["mfu_note"]  # MFU's peak: the trn2 chip's


def test_a_second_run_on_the_same_neff_cache_compiles_nothing_and_reaches_its_first_step_sooner(cold_and_warm):
    (cold, truth), (warm, warm_truth) = cold_and_warm
    assert warm_truth[-1]["compiles"] == 0  # the double found every NEFF on disk
    c, w = cold.summary, warm.summary
    assert _neff_groups(w) == [] and w["compile_count"] == 0
    neff = w["neuron"]["neff_cache"]
    assert neff["disk_hits"] == truth[-1]["compiles"] and neff["log_hits"] == truth[-1]["compiles"]
    assert neff["log_misses"] == 0
    assert c["neuron"]["neff_cache"]["log_misses"] == truth[-1]["compiles"] == c["neuron"]["neff_cache"]["disk_misses"]
    assert c["figures"]["ttfi_cache"] == "cold" and w["figures"]["ttfi_cache"] == "warm"
    assert w["figures"]["ttfi_s"] < c["figures"]["ttfi_s"]
    assert "time to first step" in cold.stdout and "first step's compile cache" in cold.stdout


def test_the_scripts_output_is_byte_for_byte_what_it_prints_alone(tmp_path: Path):
    """TorchNeuron's warning (its log level 1, the default) reaches stderr as it would alone,
    passed on from the log file it was written to; its NEFF cache lines never reach stdout."""
    env = torchneuron_env(tmp_path, TORCHNEURON_DOUBLE_WARN="Failed to initialize persistent cache backend")
    alone = run_alone(EAGER, [], env, tmp_path)
    assert alone.returncode == 0, alone.stderr.decode()[-2000:]
    assert b"[Neuron] [WARNING]" in alone.stderr and b"NEFF_CACHE" not in alone.stdout
    run = run_torchneuron(tmp_path / "run", EAGER, [], {**env, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cold")})
    assert run.returncode == 0, run.stderr[-3000:]
    assert (run.run_dir / "stdout.log").read_bytes() == alone.stdout
    assert (run.run_dir / "stderr.log").read_bytes() == alone.stderr
    neff = run.summary["neuron"]["neff_cache"]
    assert neff["log_relayed"] == 1 and neff["log_misses"] == run.summary["compile_count"] > 0
    log = (run.run_dir / "torchneuron.log").read_text()
    assert "[NEFF_CACHE] Cache MISS for key:" in log and (run.run_dir / "torchneuron.log").stat().st_mode & 0o077 == 0


def test_compare_of_the_cold_and_warm_runs_says_what_the_neff_cache_saved_in_seconds_and_dollars(cold_and_warm, tmp_path):
    from torch213 import compare_runs

    (cold, _), (warm, _) = cold_and_warm

    def compare(fmt: str) -> str:
        return compare_runs(cold.run_dir, warm.run_dir, fmt, tmp_path)

    (saved,) = json.loads(compare("json"))["cache_saved"]  # B (warm) against A (cold), not the other way
    c, w = cold.summary, warm.summary
    assert saved["run"] == "B" and saved["against"] == "A"
    assert saved["saved_s"] == pytest.approx(c["figures"]["ttfi_s"] - w["figures"]["ttfi_s"])  # the figures' values
    assert saved["saved_s"] > 0 and saved["compile_saved_s"] == pytest.approx(c["compile_total_s"])
    assert saved["saved_usd"] == pytest.approx(saved["saved_s"] * 40 / 3600)  # the runs' $40/hour
    text = compare("md")
    assert f"B's warm compile cache saved {saved['saved_s']:.1f} s to the first step against A's cold start" in text
    assert f"${saved['saved_usd']:,.4f} at $40.00/hour" in text
