"""The bundled workload on TorchNeuron (issue 44 item 9): `workloads/train.py` takes the `neuron` device
where TorchNeuron is installed, and each of the seed's failure knobs reproduces TorchNeuron's form of
the failure: a shape per step (eager NEFFs per new sequence length), a graph break under
`torch.compile(backend="neuron")`, a CPU fallback. Real `neurondesk run`s under torch 2.13, the
TorchNeuron double (tests/torchneuron_double/) playing TorchNeuron on the CPU."""

from __future__ import annotations

import json
import sys

from conftest import REPO, TRAIN
from torch213 import run_torchneuron, torchneuron_env

DEMO = ["--preset", "demo", "--log-every", "5"]


def _config(run) -> dict:
    out = (run.run_dir / "stdout.log").read_text()  # the workload's own stdout
    line = next(x for x in out.splitlines() if x.startswith("neurondesk-config: "))
    return json.loads(line.split(": ", 1)[1])


def _run(tmp_path, name: str, flags: list[str]):
    env = torchneuron_env(tmp_path / name)
    run = run_torchneuron(tmp_path / name / "run", TRAIN, [*DEMO, *flags], env)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    return run


def test_double_workload_dynamic_shape_compiles_neffs_at_each_new_length_on_the_neuron_device(tmp_path):
    steps = 10
    run = _run(tmp_path, "dynamic", ["--steps", str(steps), "--dynamic-shape"])
    assert _config(run)["device"] == "neuron" and run.summary["device"]["kind"] == "neuron"
    sys.path.insert(0, str(REPO / "workloads"))
    try:
        from data import dynamic_seq_lens
    finally:
        sys.path.remove(str(REPO / "workloads"))
    lens = dynamic_seq_lens(64, steps, 0)  # the workload's own lengths, step i at index i
    groups = [c for c in run.summary["compiles"] if c["source"] == "torchneuron"]
    new_lengths = [i for i, n in enumerate(lens) if n not in lens[:i]]
    assert [g["step"] for g in groups] == new_lengths  # a length that comes back compiles nothing
    assert len(new_lengths) < steps  # the seed repeats a length within 10 steps: the case is tested
    for g in groups[1:]:
        assert g["cause"] == "shape-change" and g["input_shapes"] == [[8, lens[g["step"]]]]
        assert g["previous_shapes"] == [[8, lens[g["step"] - 1]]]
    assert run.summary["recompiles_after_warmup"] == sum(1 for g in groups if g["step"] >= 5)


def test_double_workload_compile_graph_break_is_a_dynamo_break_at_the_print_with_neuron_graphs(tmp_path):
    run = _run(tmp_path, "compile", ["--steps", "8", "--compile", "--graph-break", "print"])
    config = _config(run)
    assert config["compile_backend"] == "neuron" and config["device"] == "neuron"
    source = TRAIN.read_text().splitlines()
    breaks = [b for b in run.summary["graph_breaks"] if b["location"].startswith(str(TRAIN) + ":")]
    assert breaks, run.summary["graph_breaks"]
    line = int(breaks[0]["location"].rsplit(":", 1)[1])
    assert "print(loss" in source[line - 1]  # the break is the knob's print
    names = [s["graph_name"] for s in run.summary["neuron"]["compile_splits"]]
    assert any("forward" in n for n in names) and any("backward" in n for n in names)


def test_double_workload_cpu_fallback_is_named_from_get_fallback_ops(tmp_path):
    run = _run(tmp_path, "fallback", ["--steps", "6", "--cpu-fallback"])
    assert _config(run)["cpu_fallback"] is True
    # TorchNeuron logs the fallback at Python's DEBUG level (unseen): the probe reads get_fallback_ops()
    # at exit, and the run's diagnostics name the op; the run goes on and records its six steps
    said = {d["kind"]: d["message"] for d in run.summary.get("diagnostics", [])}
    assert "cpu-fallback" in said and "aten::_unique2" in said["cpu-fallback"], said
    assert "falling back" not in (run.run_dir / "stderr.log").read_text().lower()
    assert run.summary["steps"] == 6 and run.summary["device"]["kind"] == "neuron"


def test_workload_device_neuron_without_torchneuron_says_so(tmp_path):
    """--device neuron where no TorchNeuron is installed: one clear error, not a CPU run."""
    import subprocess

    from conftest import base_env
    from torch213 import torch213_python

    p = subprocess.run([torch213_python(), str(TRAIN), *DEMO, "--steps", "1", "--device", "neuron"],
                       capture_output=True, text=True, timeout=300, env=base_env(tmp_path), cwd=REPO)
    assert p.returncode != 0 and "torch-neuronx" in p.stderr.splitlines()[-1]
