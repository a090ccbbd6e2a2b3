"""TorchNeuron's failures named, with the fix (issue 44 item 6), in real `neurondesk run --check`
processes under torch 2.13 with the TorchNeuron double playing each as documented: torch.compile's
dynamic=True rejected (NCC_EMOD025, the run dies), a non-default mode ignored, a compiled graph that
fails on the device run eagerly (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0), eager ops run on the
CPU (get_fallback_ops). Each is a diagnostic in summary.json (what the console and the report show)
and fails the gate; a clean run has none and passes."""

from __future__ import annotations

from pathlib import Path

from torch213 import SCRIPTS, run_torchneuron, torchneuron_env

SCRIPT = SCRIPTS / "failures.py"
KINDS = {"dynamic-shape", "mode-ignored", "graph-fallback", "cpu-fallback"}


def _run(tmp_path: Path, args: list[str], **env: str):
    return run_torchneuron(tmp_path / "run", SCRIPT, args, torchneuron_env(tmp_path, **env), nd_args=["--check"])


def _said(run) -> dict[str, str]:
    return {d["kind"]: d["message"] for d in run.summary["diagnostics"] if d["kind"] in KINDS}


def test_dynamic_true_rejected_is_named_with_the_fix_and_fails_the_gate_with_the_double(tmp_path: Path):
    run = _run(tmp_path, ["--dynamic"])
    assert run.returncode != 0
    said = _said(run)
    assert set(said) == {"dynamic-shape"}
    assert "NCC_EMOD025 (instruction 'l_args_0_' has shape 'f32[s" in said["dynamic-shape"]
    assert "drop dynamic=True" in said["dynamic-shape"]
    assert run.summary["crash"]["kind"] == "dynamic-shape"
    assert "neurondesk check failed: TorchNeuron: the Neuron compiler rejected a dynamic shape" in run.stderr


def test_a_mode_ignored_and_graphs_run_eagerly_are_named_and_fail_the_gate_with_the_double(tmp_path: Path):
    run = _run(tmp_path, ["--mode", "max-autotune"], TORCHNEURON_DOUBLE_GRAPH_FAIL="1",
               TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION="0")
    assert (run.run_dir / "stdout.log").read_text().startswith("done, loss ")  # it trained to its end
    said = _said(run)
    assert set(said) == {"mode-ignored", "graph-fallback"}
    assert "mode 'max-autotune' ignored" in said["mode-ignored"]
    assert "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1" in said["graph-fallback"]
    # the warning TorchNeuron logged at the user's level still reaches their stderr, told once
    assert (run.run_dir / "stderr.log").read_text().count("torch.compile mode 'max-autotune'") == 1
    assert run.returncode != 0 and "neurondesk check failed: TorchNeuron: torch.compile mode" in run.stderr


def test_eager_ops_on_the_cpu_are_named_from_get_fallback_ops_with_the_double(tmp_path: Path):
    run = _run(tmp_path, [], TORCHNEURON_DOUBLE_CPU_FALLBACK="aten.nonzero")
    said = _said(run)
    assert set(said) == {"cpu-fallback"}
    assert "1 eager op(s) fell back to the CPU (aten::nonzero)" in said["cpu-fallback"]
    assert "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1" in said["cpu-fallback"]
    assert run.returncode != 0 and "check failed: TorchNeuron: 1 eager op(s)" in run.stderr


def test_a_clean_torchneuron_run_has_none_and_passes_the_gate_with_the_double(tmp_path: Path):
    run = _run(tmp_path, [])
    assert run.returncode == 0, run.stderr[-3000:]
    assert _said(run) == {} and "neurondesk check passed" in run.stderr
