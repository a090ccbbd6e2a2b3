"""Memory that creeps (issue 36 item 3) on real runs on this CPU, under `neurondesk run --headless`:
two ranks under torchrun, rank 1 keeping every step's held-out loss tensor in a list (its autograd
graph with it: its host RSS really grows, about a MiB a step), rank 0 keeping floats: rank 1 is named,
with its pace and the line lint finds, and rank 0 is not; one process keeping ``loss.item()`` names
nothing. Lint's rule on small scripts: tests/runs/test_lint.py."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, Run, base_env, neurondesk_run

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
WORKLOAD = DATA / "workloads" / "leaky_losses.py"
# long enough for the trend test's MIN_SAMPLES process-tree samples (1 Hz) over MIN_SPAN_S steady seconds
SECONDS = "32"


LIMIT = 6 << 30  # two ranks' torch (~0.8 GiB each) and half a GiB of leak fit well under it


def _memory_cgroup(name: str) -> str | None:
    """A fresh memory cgroup limited to LIMIT in a hierarchy already mounted whole (v2 with the memory
    controller, or v1's memory one), or None (not root, none mounted, the kernel refused)."""
    if os.geteuid() != 0:
        return None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or fields[3] != "/":
            continue
        point, v2 = fields[4], tail[0] == "cgroup2"
        if not (v2 or (tail[0] == "cgroup" and "memory" in tail[2].split(","))):
            continue
        folder = Path(point, name)
        try:
            if v2 and "memory" not in Path(point, "cgroup.subtree_control").read_text().split():
                continue
            folder.mkdir()
            (folder / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(LIMIT))
            return str(folder)
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
    return None


@pytest.fixture(scope="module")
def leaky(tmp_path_factory):
    """torchrun, 2 ranks on the CPU (they train apart: no collective); rank 1 keeps its loss tensors. In a
    memory cgroup limited to LIMIT where one can be made (the forecast is then against it)."""
    tmp = tmp_path_factory.mktemp("leaky")
    run_dir = tmp / "run"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cgroup = _memory_cgroup(f"neurondesk-creep-{os.getpid()}")
    # the wrapper puts itself into the cgroup, then becomes the workload (as systemd-run --scope does)
    wrapper = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] if cgroup else []
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.2xlarge",
           "--run-dir", str(run_dir), "--warmup-steps", "3", "--", *wrapper, sys.executable, "-m",
           "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
           str(WORKLOAD), "--keep", "tensor", "--leak-rank", "1", "--seconds", SECONDS]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp),
                           cwd=REPO)
    finally:
        if cgroup:
            with contextlib.suppress(OSError):
                os.rmdir(cgroup)
    return Run(p.returncode, p.stdout, p.stderr, run_dir), cgroup


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return neurondesk_run(tmp_path_factory.mktemp("clean"), ["--keep", "item", "--seconds", SECONDS],
                          ["--warmup-steps", "3"], workload=WORKLOAD)


def _append_line() -> int:
    lines = WORKLOAD.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "held_out.append(held_out_loss)" in line)


@needs_torch
def test_a_list_of_loss_tensors_is_named_as_memory_that_creeps_with_its_rank_and_line(leaky, tmp_path):
    run, cgroup = leaky
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    creep = s["memory_creep"]
    assert creep is not None and creep == s["figures"]["memory_creep"], s.get("notices")  # one truth
    assert s["world_size"] == 2 and creep["series"] == 2  # both ranks' RSS tested
    (leak,) = creep["leaks"]  # rank 1 only: rank 0 keeps floats
    pid = next(e["pid"] for e in run.events if e["kind"] == "process_attached" and e.get("rank") == 1)
    assert leak["memory"] == "host_rss" and leak["rank"] == 1 and leak["pid"] == pid
    assert leak["kind"] == "kept-per-step" and leak["bytes_per_step"] > 256 << 10  # ~1 MiB of activations a step
    assert leak["since_step"] >= 3 and leak["samples"] >= 20 and leak["z"] >= 4
    assert leak["script"] == str(WORKLOAD) and ".item()" in leak["likely"]
    assert leak["hours_to_limit"] is not None
    if cgroup:  # the forecast is against the cgroup's limit, less what the ranks hold
        assert leak["limit"] == "cgroup memory limit" and leak["limit_bytes"] == LIMIT
        assert 0 < leak["left_bytes"] < LIMIT - (1 << 30)
        assert "the cgroup's memory limit (6.0 GiB," in leak["words"] and "the cgroup's limit reached in" in leak["headline"]
    else:
        assert leak["limit"] == "host memory available"
    # said live on the status line, and at the end with the line lint finds
    assert "memory creeps: rank 1 host RSS +" in run.stderr
    where = f"{WORKLOAD}:{_append_line()}"
    assert f"(lint: {where})" in run.stderr
    assert "## Memory that creeps" in (run.run_dir / "summary.md").read_text()
    # `neurondesk summary` of the folder says the same, with the line
    out = subprocess.run([sys.executable, "-m", "neurondesk.cli", "summary", str(run.run_dir)], capture_output=True,
                         text=True, timeout=300, env=base_env(tmp_path), cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "memory creeps" in out.stdout and where in out.stdout
    # and `neurondesk report`: the HTML report's creep, with the line
    page = tmp_path / "report.html"
    out = subprocess.run([sys.executable, "-m", "neurondesk.cli", "report", str(run.run_dir), "-o", str(page)],
                         capture_output=True, text=True, timeout=300, env=base_env(tmp_path), cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    creep_div = page.read_text().split('id="r0-memory-creep"', 1)[1].split("</div>", 1)[0]
    assert "rank 1 host RSS +" in creep_div and where in creep_div


@needs_torch
def test_the_same_loop_keeping_floats_names_no_creep(clean):
    run = clean
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    assert s["steady"]["steps"] >= 50  # as long a steady run as the leaky one
    assert s["memory_creep"] is None and s["figures"]["memory_creep"] is None
    assert "memory creeps" not in run.stderr


def test_the_html_report_locates_a_creep_on_the_struct_as_summary_does_on_the_dict():
    """`neurondesk report` reads the summary struct, `neurondesk summary` and the status line its dict:
    both get the line lint finds in the rank's script, in the same words."""
    import msgspec

    from neurondesk.core.findings.memory_creep import KIND_PER_STEP, KIND_TIME, MemoryCreep, MemoryLeak
    from neurondesk.lint.locate import annotate_memory, located_memory

    def leak(kind: str, script: str | None) -> MemoryLeak:
        return MemoryLeak(memory="host_rss", rank=1, bytes_per_hour=1e9, since_s=5.0, window_s=30.0, samples=30,
                          start_bytes=1 << 30, now_bytes=2 << 30, z=5.0, kind=kind, likely="a tensor kept",
                          script=script, headline=f"rank 1 host RSS ({kind})", words=f"rank 1 grows ({kind})")

    creep = MemoryCreep(leaks=[leak(KIND_PER_STEP, str(WORKLOAD)), leak(KIND_TIME, str(WORKLOAD))], series=2,
                        short="rank 1 host RSS +1 GiB an hour", words="rank 1 host RSS grows")
    located = located_memory(creep)
    assert msgspec.to_builtins(located) == annotate_memory(msgspec.to_builtins(creep))
    where = f"{WORKLOAD}:{_append_line()}"
    per_step, in_time = located.leaks
    assert per_step.location == where and per_step.words.startswith("rank 1 grows (kept-per-step) (lint: ")
    assert in_time == creep.leaks[1]  # a leak that grows with time is not lint's
    assert located.short == f"{creep.short} (lint: {where})" and located.words == f"{creep.words} (lint: {where})"
    assert located_memory(msgspec.structs.replace(creep, leaks=[leak(KIND_TIME, None)])).short == creep.short
