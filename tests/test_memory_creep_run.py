"""Memory that creeps (issue 36 item 3) on real runs on this CPU, under `neurondesk run --headless`:
an eager loop that keeps every step's held-out loss tensor in a list (its autograd graph with it: the
host RSS really grows, about a MiB a step) is named, with its rank, its pace and the line lint finds;
the same loop keeping ``loss.item()`` names nothing. Lint's rule on small scripts: tests/test_lint.py."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import DATA, REPO, base_env, neurondesk_run

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
WORKLOAD = DATA / "workloads" / "leaky_losses.py"
# long enough for the trend test's MIN_SAMPLES process-tree samples (1 Hz) over MIN_SPAN_S steady seconds
SECONDS = "32"


def _run(tmp, keep: str):
    return neurondesk_run(tmp, ["--keep", keep, "--seconds", SECONDS], ["--warmup-steps", "3"], workload=WORKLOAD)


@pytest.fixture(scope="module")
def leaky(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("leaky"), "tensor")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("clean"), "item")


def _append_line() -> int:
    lines = WORKLOAD.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "held_out.append(held_out_loss)" in line)


@needs_torch
def test_a_list_of_loss_tensors_is_named_as_memory_that_creeps_with_its_rank_and_line(leaky, tmp_path):
    run = leaky
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    creep = s["memory_creep"]
    assert creep is not None and creep == s["figures"]["memory_creep"], s.get("notices")  # one truth
    leak = creep["leaks"][0]
    pid = next(e["pid"] for e in run.events if e["kind"] == "process_attached")
    assert leak["memory"] == "host_rss" and leak["rank"] == 0 and leak["pid"] == pid
    assert leak["kind"] == "kept-per-step" and leak["bytes_per_step"] > 256 << 10  # ~1 MiB of activations a step
    assert leak["since_step"] >= 3 and leak["samples"] >= 20 and leak["z"] >= 4
    assert leak["script"] == str(WORKLOAD) and ".item()" in leak["likely"]
    assert leak["hours_to_limit"] is not None and leak["limit"] in ("cgroup memory limit", "host memory available")
    # said live on the status line, and at the end with the line lint finds
    assert "memory creeps: rank 0 host RSS +" in run.stderr
    where = f"{WORKLOAD}:{_append_line()}"
    assert f"(lint: {where})" in run.stderr.splitlines()[-1] or any(f"(lint: {where})" in x for x in run.stderr.splitlines())
    assert "## Memory that creeps" in (run.run_dir / "summary.md").read_text()
    # `neurondesk summary` of the folder says the same, with the line
    out = subprocess.run([sys.executable, "-m", "neurondesk.cli", "summary", str(run.run_dir)], capture_output=True,
                         text=True, timeout=300, env=base_env(tmp_path), cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "memory creeps" in out.stdout and where in out.stdout


@needs_torch
def test_the_same_loop_keeping_floats_names_no_creep(clean):
    run = clean
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    assert s["steady"]["steps"] >= 50  # as long a steady run as the leaky one
    assert s["memory_creep"] is None and s["figures"]["memory_creep"] is None
    assert "memory creeps" not in run.stderr
