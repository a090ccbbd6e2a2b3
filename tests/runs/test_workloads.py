"""Real runs of the bundled reference workloads (workloads/*.py) as plain subprocesses.

They share two CPU cores with everything else, so runs are few, short and on the demo preset;
the trap checks run several configurations in one process, where XLA's in-memory compile cache
makes the repeated graphs cheap.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, XLA_TEST_FLAGS

WORKLOADS = REPO / "workloads"
TRAIN, TRACE = WORKLOADS / "train.py", WORKLOADS / "trace.py"
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_XLA = HAS_TORCH and importlib.util.find_spec("torch_xla") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in this interpreter")
needs_xla = pytest.mark.skipif(not HAS_XLA, reason="torch_xla is not importable in this interpreter")
DEMO = ["--preset", "demo"]
# Demo preset shrunk further by explicit flags (which override the preset): halves XLA compile time.
TINY = [*DEMO, "--num-layers", "1", "--d-model", "32", "--nhead", "2", "--dim-feedforward", "64", "--vocab", "100"]


def xla_cpu_env() -> dict[str, str]:
    """This environment, on XLA's CPU backend as the tests run it, without XLA's debug switches."""
    env = {**os.environ, "PJRT_DEVICE": "CPU", "XLA_FLAGS": XLA_TEST_FLAGS}
    for noisy in ("PT_XLA_DEBUG", "PT_XLA_DEBUG_LEVEL", "TORCH_LOGS"):
        env.pop(noisy, None)
    return env


def run(script: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout, env=xla_cpu_env(), cwd=WORKLOADS.parent)


def tagged(stdout: str, tag: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(tag + ": ")]
    assert len(lines) == 1, f"expected one {tag} line in:\n{stdout[-3000:]}"
    return json.loads(lines[0].split(": ", 1)[1])


def loss_steps(stdout: str) -> list[int]:
    return [int(ln.split()[1]) for ln in stdout.splitlines() if ln.startswith("step ") and " loss " in ln]


@pytest.fixture(scope="module")
def data_mod():
    if not HAS_TORCH:
        pytest.skip("torch is not installed in this interpreter")
    sys.path.insert(0, str(WORKLOADS))
    try:
        import data
    finally:
        sys.path.remove(str(WORKLOADS))
    return data


@needs_torch
def test_data_is_deterministic_per_seed(data_mod):
    import torch

    a = [b for b in data_mod.make_loader(4, batch_size=2, seq_len=8, vocab=50, seed=3)]
    again = [b for b in data_mod.make_loader(4, batch_size=2, seq_len=8, vocab=50, seed=3, num_workers=2)]
    other = [b for b in data_mod.make_loader(4, batch_size=2, seq_len=8, vocab=50, seed=4)]
    assert len(a) == 4 and a[0][0].shape == (2, 8) and a[0][0].dtype == torch.int64
    for (ids, labels), (ids2, labels2) in zip(a, again, strict=True):  # worker count does not change order
        assert torch.equal(ids, ids2) and torch.equal(labels, labels2)
    assert not torch.equal(a[0][0], other[0][0])
    assert not torch.equal(a[0][0], a[1][0])
    assert int(a[0][0].max()) < 50 and int(a[0][1].max()) < 50
    # make_batch with the same per-batch seed is the --no-loader path: same data.
    g = torch.Generator().manual_seed(data_mod.batch_seed(3, 2))
    ids, labels = data_mod.make_batch(2, 8, 50, generator=g)
    assert torch.equal(ids, a[2][0]) and torch.equal(labels, a[2][1])
    # the lengths depend on the seed alone: not on the global RNG, not on earlier calls (values of
    # torch's CPU generator, pinned with torch 2.9.0)
    torch.manual_seed(12345)
    torch.rand(1000)
    assert data_mod.dynamic_seq_lens(64, 10, 0) == [37, 40, 55, 19, 54, 43, 30, 49, 30, 61]
    assert data_mod.dynamic_seq_lens(64, 10, 1) == [60, 40, 62, 46, 55, 51, 57, 49, 20, 62]
    assert all(16 <= n <= 64 for n in data_mod.dynamic_seq_lens(64, 50, 0))


@needs_torch
def test_loader_delay_slows_each_batch(data_mod):
    t = time.perf_counter()
    list(data_mod.make_loader(3, batch_size=1, seq_len=4, vocab=10, delay_ms=40))
    assert time.perf_counter() - t >= 0.12


@needs_xla
def test_train_demo_prints_config_progress_and_timing():
    p = run(TRAIN, *TINY, "--steps", "9", "--log-every", "4", "--target-loss", "2.5")
    assert p.returncode == 0, p.stderr[-3000:]
    cfg = tagged(p.stdout, "neurondesk-config")
    assert cfg["device"] == "xla" and cfg["preset"] == "demo" and cfg["precision"] == "fp32"
    assert (cfg["batch_size"], cfg["seq_len"], cfg["steps"], cfg["target_loss"]) == (8, 64, 9, 2.5)
    assert cfg["model"] == {"vocab": 100, "d_model": 32, "nhead": 2, "num_layers": 1, "dim_feedforward": 64,
                            "dropout": 0.1}
    assert cfg["param_count"] > 0 and "seed" in cfg["data_order"]
    assert loss_steps(p.stdout) == [1, 4, 8, 9]
    timing = tagged(p.stdout, "workload-timing")
    assert timing["steps_timed"] == 4  # steps 6..9: the first 5 are warm-up, none of these compiled
    assert timing["steady_step_time_s"] > 0
    assert timing["samples_per_s"] == pytest.approx(8 / timing["steady_step_time_s"])
    assert timing["tokens_per_s"] == pytest.approx(8 * 64 / timing["steady_step_time_s"])


@needs_xla
def test_crash_at_step_exits_nonzero_with_traceback():
    p = run(TRAIN, *TINY, "--steps", "10", "--crash-at-step", "2", "--no-loader", "--log-every", "1")
    assert p.returncode != 0
    assert "Traceback" in p.stderr and "RuntimeError: crash requested at step 2" in p.stderr
    tagged(p.stdout, "neurondesk-config")
    assert "workload-timing" not in p.stdout


@needs_xla
def test_trace_recompiles_per_batch_size_and_reports_timing():
    p = run(TRACE, *TINY, "--batch-sizes", "1,2", "--iters", "7", "--log-every", "5")
    assert p.returncode == 0, p.stderr[-3000:]
    cfg = tagged(p.stdout, "neurondesk-config")
    assert cfg["workload"] == "inference" and cfg["path"] in ("xla", "torch_neuronx.trace")
    assert cfg["batch_sizes"] == [1, 2]
    assert "step 5 batch_size 1" in p.stdout and "step 10 batch_size 2" in p.stdout
    timing = tagged(p.stdout, "workload-timing")
    assert set(timing["per_batch_size"]) == {"1", "2"} and timing["steps_timed"] == 4
    assert timing["steady_step_time_s"] > 0


@needs_torch
def test_train_on_plain_cpu_device():
    p = run(TRAIN, *DEMO, "--device", "cpu", "--steps", "7", "--log-every", "3", "--num-workers", "1")
    assert p.returncode == 0, p.stderr[-3000:]
    assert tagged(p.stdout, "neurondesk-config")["device"] == "cpu"
    assert loss_steps(p.stdout) == [1, 3, 6, 7]
    assert tagged(p.stdout, "workload-timing")["steps_timed"] == 2


# Runs train.main for several configurations in one process and reports, per configuration, the
# XLA graph executions and compiles it caused (deltas of torch_xla.debug.metrics).
TRAP_PROBE = r"""
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
import torch_xla.debug.metrics as met
import train
def counts():
    ex = met.metric_data("ExecuteTime")
    return (ex[0] if ex else 0), (met.counter_value("UncachedCompile") or 0)
out = {}
for name, args in json.loads(sys.argv[2]).items():
    e0, c0 = counts()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = train.main(args)
    e1, c1 = counts()
    out[name] = {"rc": rc, "executions": e1 - e0, "compiles": c1 - c0, "stdout": buf.getvalue()}
print(json.dumps(out))
"""


@needs_xla
def test_traps_do_what_they_claim_in_xla_metrics(data_mod):
    steps = 7
    base = [*TINY, "--steps", str(steps)]
    configs = {
        "plain": [*base, "--log-every", "1"],  # logging every step must not add executions
        "optimizer_step": [*base, "--xla-style", "optimizer_step", "--log-every", "1"],
        "bf16": [*base, "--precision", "bf16"],
        "loader": [*base, "--xla-style", "loader", "--log-every", "1"],
        "item": [*base, "--graph-break", "item"],
        "print": [*base, "--graph-break", "print"],
        "branch": [*base, "--graph-break", "branch"],
        "dynamic": [*base, "--dynamic-shape", "--seq-len", "16"],
    }
    p = subprocess.run([sys.executable, "-c", TRAP_PROBE, str(WORKLOADS), json.dumps(configs)],
                       capture_output=True, text=True, timeout=600, env=xla_cpu_env())
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.splitlines()[-1])
    assert all(r["rc"] == 0 for r in res.values())
    for name in ("plain", "optimizer_step", "loader", "bf16"):
        assert res[name]["executions"] == steps, name  # one graph per step
    for name in ("plain", "optimizer_step", "loader"):
        assert loss_steps(res[name]["stdout"]) == list(range(1, steps + 1)), name
    assert res["plain"]["compiles"] == 2  # step 1 (AdamW state init) and the steady step; no recompiles
    for name in ("item", "print", "branch"):
        assert res[name]["executions"] == 2 * steps, name  # the host read cuts each step in two
    assert res["print"]["stdout"].count("tensor(") == steps
    lens = data_mod.dynamic_seq_lens(16, steps, 0)
    # Step 1's graph is unique (optimizer state init); after that one compile per new length.
    assert res["dynamic"]["compiles"] == 1 + len(set(lens[1:]))
    timing = tagged(res["dynamic"]["stdout"], "workload-timing")
    assert timing["steps_skipped_compiled"] == len({n for i, n in enumerate(lens[5:], 5) if n not in lens[1:i]})
