"""MFU and HFU: model FLOPs against the dense peak of the device the run used (never the sparse one),
hardware FLOPs from neuron-monitor, through the real reducer and summary."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from neurondesk.collectors.devices.neuron_monitor import parse_report
from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.mfu import cuda_chip, resolve_peak
from neurondesk.core.node.prices import bundled_price_table
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary

PARAMS = 1_000_000
TOKENS = 8 * 512  # per step
STEP_S = 0.5  # -> 8192 tokens/s


def summary_of(state: RunState) -> dict:
    """summary.json's content for the run."""
    return run_summary(state).as_dict()


def run_state(device_kind, device_name="", instance=None, precision="bf16", steps=10, config=None,
              neuron_lines=(), pid=41872):
    """A run through the reducer: 10 steps of 0.5 s, the first compiling, warm-up 2."""
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "train.py"], instance_type=instance,
                          price_per_hour=1.0 if instance else None, warmup_steps=2))
    s.apply(ev.ProcessAttached(t=0.1, pid=pid))
    s.apply(ev.WorkloadConfig(t=0.2, values=config if config is not None else {"param_count": PARAMS}))
    s.apply(ev.DeviceSeen(t=0.3, pid=pid, device_kind=device_kind, device_name=device_name, precision=precision))
    lines = list(neuron_lines)
    for i in range(steps):
        if i == 0:
            s.apply(ev.CompileFinished(t=1.0, source="probe", duration_s=5.0, pid=pid, step=0))
        s.apply(ev.StepEnded(t=1.0 + i * STEP_S, pid=pid, step=i, duration_s=STEP_S, samples=8, tokens=TOKENS,
                             compiles=1 if i == 0 else 0))
        if i >= 1 and lines:  # one neuron-monitor report per step, as a 1 s period roughly would give
            sample = parse_report(lines.pop(0), 1.1 + i * STEP_S)
            s.apply(sample)
    return s


def test_mfu_on_trainium_is_six_n_d_over_the_dense_bf16_peak():
    s = summary_of(run_state("neuron", "xla:0 (NEURON)", "trn1.2xlarge"))
    tokens_per_s = TOKENS / STEP_S
    assert s["steady"]["tokens_per_s"] == pytest.approx(tokens_per_s)
    assert s["flops"]["peak_per_s"] == pytest.approx(190e12)  # 1 Trainium chip, 190 TFLOPS dense BF16
    assert s["mfu"] == pytest.approx(6 * PARAMS * tokens_per_s / 190e12, rel=1e-5)
    assert s["mfu_note"] == "6 × 1,000,000 params × tokens/s ÷ 1 × trainium 190 TFLOPS dense bf16 (trn1.2xlarge)"
    assert s["hfu"] is None  # no neuron-monitor here


def test_h100_peak_is_the_dense_figure_not_the_sparse_one():
    s = summary_of(run_state("cuda", "NVIDIA H100 80GB HBM3", "p5.48xlarge"))
    assert s["flops"]["peak_per_s"] == pytest.approx(8 * 989.4e12)  # 1,978.9 would be the sparse figure
    assert s["mfu"] == pytest.approx(6 * PARAMS * (TOKENS / STEP_S) / (8 * 989.4e12), rel=1e-5)


def test_gpu_without_instance_type_uses_its_name_and_the_gpus_used():
    table = bundled_price_table()
    assert cuda_chip("NVIDIA L40S") == "l40s" and cuda_chip("NVIDIA L4") == "l4"  # not l4 for an L40S
    assert cuda_chip("NVIDIA A100-SXM4-40GB") == "a100" and cuda_chip("NVIDIA A10G") == "a10g"
    peak = resolve_peak("cuda", "NVIDIA A100-SXM4-80GB", None, "bf16", 2, table)
    assert peak.flops_per_s == pytest.approx(2 * 312e12) and "2 GPU(s) used" in peak.what
    # the GPU's name wins over an instance type that has another chip
    assert resolve_peak("cuda", "NVIDIA L4", "p5.48xlarge", "bf16", 1, table).flops_per_s == pytest.approx(121e12)
    assert resolve_peak("cuda", "Some Future GPU", None, "bf16", 1, table).flops_per_s is None


def test_fp8_uses_the_fp8_dense_peak_and_fp32_says_which_peak_it_is_held_to():
    table = bundled_price_table()
    assert resolve_peak("neuron", "", "trn2.48xlarge", "fp8", 1, table).flops_per_s == pytest.approx(16 * 1299e12)
    fp32 = resolve_peak("neuron", "", "trn1.32xlarge", "fp32", 32, table)
    assert fp32.flops_per_s == pytest.approx(16 * 190e12)
    assert "fp32 run, measured against the bf16 peak" in fp32.what
    assert resolve_peak("cuda", "NVIDIA A100", "p4d.24xlarge", "fp8", 8, table).flops_per_s is None  # no FP8 on A100


def test_cpu_runs_have_no_mfu_and_say_why():
    s = summary_of(run_state("xla-cpu", "xla:0 (CPU)", "trn1.2xlarge", precision="fp32"))
    assert s["mfu"] is None and s["hfu"] is None
    assert s["mfu_note"] == ("no peak FLOPS for a xla-cpu run (MFU needs a Neuron or CUDA device); "
                             "it was priced as trn1.2xlarge, but it ran on xla-cpu")
    assert s["flops"]["model_per_s"] == pytest.approx(6 * PARAMS * TOKENS / STEP_S)  # still known


def test_neuron_without_instance_type_or_param_count():
    s = summary_of(run_state("neuron", "xla:0 (NEURON)", None))
    assert s["mfu"] is None and "pass --instance-type" in s["mfu_note"]
    s = summary_of(run_state("neuron", "xla:0 (NEURON)", "trn1.2xlarge", config={"batch_size": 8}))
    assert s["mfu"] is None
    assert s["mfu_note"].startswith("the workload declared neither param_count nor model_flops_per_step; peak 1 ×")


def test_counted_model_flops_per_step_take_precedence():
    s = summary_of(run_state("neuron", "", "trn1.2xlarge", config={"param_count": PARAMS,
                                                                     "model_flops_per_step": 3.8e13}))
    assert s["flops"]["model_per_s"] == pytest.approx(3.8e13 / STEP_S)
    assert s["mfu"] == pytest.approx(3.8e13 / STEP_S / 190e12, rel=1e-5)
    assert "counted by the workload" in s["mfu_note"]


def test_hfu_is_the_mean_neuron_monitor_flops_over_steady_samples():
    lines = (FIXTURES / "neuron-monitor-trn1.jsonl").read_text().splitlines()
    samples = [parse_report(line, 0.0) for line in lines]
    per_sample = [sum(c.flops for c in x.cores if c.flops is not None and c.owner_pid is not None)
                  for x in samples]
    state = run_state("neuron", "xla:0 (NEURON)", "trn1.2xlarge", neuron_lines=lines)
    # reports are applied after steps 1..9; steady starts at step 2, so the first one does not count
    fed = per_sample[:9]
    expected = sum(fed[1:]) / len(fed[1:])
    assert state.hw_flops_samples == len(fed[1:])
    s = summary_of(state)
    assert s["flops"]["hardware_per_s"] == pytest.approx(expected, rel=1e-6)
    assert s["hfu"] == pytest.approx(expected / 190e12, rel=1e-5)
    assert max(per_sample) > 60e12  # the fixture is busy enough that this is a real number
