"""TorchNeuron's asynchronous pipeline and its timestamped metric samples, as torch-neuronx's source
has them (issue 52 items 1 and 2; the citations: tests/torchneuron_double/torch_neuronx/metrics.py and
_cache.py, docs/torchneuron.md). The double (TORCHNEURON_DOUBLE_PIPELINE=async) compiles each op's NEFF
on a worker after the op call returned, as ``_submit_xla_task_to_pipeline`` does, and stamps each
``CompilationCache.CompilationTime`` sample at its compile's end; the probe places each compile at the
step it began in. Real `neurondesk run`s under torch 2.13."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from torch213 import DOUBLE, SCRIPTS, run_torchneuron, torch213_python, torchneuron_env

EAGER = SCRIPTS / "eager_shapes.py"

# What torch-neuronx's bindings return (torch_neuronx/csrc/core/NeuronBindings.cpp, _neuron_metric_data,
# _neuron_counter_value) and what the probe reads of them
PROBE_READS = """
import json, time
import torch, torch_neuronx, torch_neuronx.metrics as met
x = torch.randn(3, 5).to("neuron"); (x * 2).sum().item(); torch_neuronx.synchronize()
data = met.get_metric_data("CompilationCache.CompilationTime")
print(json.dumps({"functions": [f for f in ("is_enabled", "get_counter_value", "get_metric_data")
                                if callable(getattr(met, f, None))],
                  "keys": sorted(data), "sample_keys": sorted(data["samples"][0]),
                  "samples": data["samples"], "total_samples": data["total_samples"],
                  "accumulator": data["accumulator"], "now_ns": time.monotonic_ns(),
                  "total": met.get_counter_value("CompilationCache.TotalCompilations"),
                  "never": met.get_counter_value("CompilationCache.NoSuchCounter"),
                  "never_metric": met.get_metric_data("CompilationCache.NoSuchMetric")}))
"""


def test_the_double_has_every_field_of_torch_neuronx_that_the_probe_reads(tmp_path: Path):
    env = torchneuron_env(tmp_path, TORCH_NEURONX_METRICS_ENABLED="1", TORCHNEURON_DOUBLE_PIPELINE="async")
    p = subprocess.run([torch213_python(), "-c", PROBE_READS], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["functions"] == ["is_enabled", "get_counter_value", "get_metric_data"]
    assert got["keys"] == ["accumulator", "repr", "samples", "total_samples"]
    assert got["sample_keys"] == ["timestamp_ns", "value"]
    samples = got["samples"]
    assert len(samples) == got["total_samples"] == got["total"] > 0  # one sample a compile
    assert sum(s["value"] for s in samples) == got["accumulator"]  # nanoseconds, summed
    stamps = [s["timestamp_ns"] for s in samples]
    assert stamps == sorted(stamps) and stamps[-1] <= got["now_ns"]  # oldest first, on the monotonic clock
    assert got["never"] is None and got["never_metric"] is None
    assert (DOUBLE / "torch_neuronx" / "metrics.py").read_text().count("NeuronBindings.cpp") >= 1  # cited


def test_with_the_pipeline_compiles_finishing_steps_later_are_placed_at_the_step_they_began_in(tmp_path: Path):
    env = torchneuron_env(tmp_path, TORCHNEURON_DOUBLE_PIPELINE="async", TORCHNEURON_DOUBLE_COMPILE_S="0.05")
    truth_path = tmp_path / "truth.json"
    run = run_torchneuron(tmp_path / "run", EAGER, [str(truth_path)], env)
    assert run.returncode == 0, run.stderr[-3000:]
    truth = {row["step"]: row["compiles"] for row in json.loads(truth_path.read_text())}
    # the pipeline runs behind Python: at step 0's end most of its NEFFs were not compiled yet (the
    # script's loss.item() at step 0 waits for them), and step 20's finished during step 21
    assert truth[0] < truth[1] and truth[20] < truth[21] == truth[29]
    groups = [c for c in run.summary["compiles"] if c["source"] == "torchneuron"]
    assert [g["step"] for g in groups] == [0, 20]
    first, change = groups
    assert first["count"] == truth[19] and change["count"] == truth[29] - truth[19]
    assert first["cause"] == "first" and change["cause"] == "shape-change"
    assert change["input_shapes"] == [[8, 16]] and change["previous_shapes"] == [[4, 16]]
    assert first["duration_s"] > 0 and change["duration_s"] > 0
    assert run.summary["compile_count"] == truth[29]
    # the step that waited says so: step 20's NEFFs finished during step 21 (issue 52 item 2)
    assert "the pipeline finished them " in change["reason"] and change["reason"].endswith(
        "s after step 20 ended: step 21 waited for them"), change["reason"]
    assert all("waited for them" not in g["reason"] or "step 1 waited" in g["reason"] for g in [first])
