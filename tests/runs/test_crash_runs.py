"""Real deaths under `neurondesk run --headless`, each told by crash.kind with what to try (core/findings/crash.py):
a rank killed by the kernel's OOM killer at a real cgroup memory limit, a real segmentation fault, a
script that stops on a NaN loss. One short process each."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, base_env, neurondesk_run

from neurondesk.collectors.cgroup_memory import parse_mountinfo

WORKLOADS = DATA / "workloads"
LIMIT = 3 << 30  # above what importing torch takes; the workload's leak reaches it in a few steps
LEAK_MIB = 256


def _v2_folder(point: str, name: str) -> str:
    if "memory" not in Path(point, "cgroup.controllers").read_text().split():
        raise OSError("the cgroup v2 mount has no memory controller")
    if "memory" not in Path(point, "cgroup.subtree_control").read_text().split():
        Path(point, "cgroup.subtree_control").write_text("+memory")
    folder = Path(point, name)
    folder.mkdir()
    (folder / "memory.max").write_text(str(LIMIT))
    with contextlib.suppress(OSError):
        (folder / "memory.swap.max").write_text("0")
    return str(folder)


def _v1_folder(point: str, name: str) -> str:
    folder = Path(point, name)
    folder.mkdir()
    (folder / "memory.limit_in_bytes").write_text(str(LIMIT))
    with contextlib.suppress(OSError):  # no swap accounting: nothing to limit
        (folder / "memory.memsw.limit_in_bytes").write_text(str(LIMIT))
    return str(folder)


@pytest.fixture
def memory_cgroup():
    """A fresh memory cgroup limited to LIMIT: under a mounted v2 hierarchy with the memory controller,
    else a v1 memory hierarchy (mounted here when none is); skipped with the kernel's reason otherwise."""
    if os.geteuid() != 0:
        pytest.skip("creating a cgroup needs root")
    name = f"neurondesk-test-{os.getpid()}"
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    reasons, folder, mounted = [], None, None
    for m in mounts:
        try:
            if m.fstype == "cgroup2" and m.root == "/":
                folder = _v2_folder(m.point, name)
            elif m.fstype == "cgroup" and "memory" in m.options and m.root == "/":
                folder = _v1_folder(m.point, name)
        except OSError as exc:
            reasons.append(f"{m.point}: {exc}")
        if folder:
            break
    if folder is None:
        mounted = tempfile.mkdtemp(prefix="nd-memcg-")
        p = subprocess.run(["mount", "-t", "cgroup", "-o", "memory", "none", mounted], capture_output=True, text=True)
        if p.returncode != 0:
            os.rmdir(mounted)
            pytest.skip(f"no memory cgroup to use ({'; '.join(reasons) or 'none mounted'}) and the kernel refused "
                        f"to mount one: {p.stderr.strip()}")
        folder = _v1_folder(mounted, name)
    yield folder
    with contextlib.suppress(OSError):
        os.rmdir(folder)
    if mounted:
        subprocess.run(["umount", mounted], check=False)
        shutil.rmtree(mounted, ignore_errors=True)


def test_a_process_killed_at_its_cgroups_memory_limit_is_the_oom_killer(tmp_path, memory_cgroup):
    run_dir = tmp_path / "run"
    # the wrapper puts itself into the cgroup, then becomes the workload (as systemd-run --scope does)
    wrapper = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', memory_cgroup,
               sys.executable, str(WORKLOADS / "eats_memory.py"), str(LEAK_MIB)]
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--", *wrapper]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path),
                       cwd=REPO)
    assert p.returncode == 128 + 9, p.stderr[-2000:]
    import json

    crash = json.loads((run_dir / "summary.json").read_text())["crash"]
    assert crash["kind"] == "oom-killer", crash
    assert crash["signal"] == "SIGKILL"
    assert crash["host_memory"]["limit_bytes"] == LIMIT
    assert crash["host_memory"]["used_bytes"] >= LIMIT - (LEAK_MIB << 20)  # its peak, near the limit
    assert crash["step"] >= 3  # it died leaking, after the steps that kept nothing
    assert "DataLoader workers" in crash["try_next"]
    assert "died (oom-killer)" in p.stderr and "neurondesk: try: " in p.stderr  # the headless final lines


def test_a_real_segfault(tmp_path):
    r = neurondesk_run(tmp_path, ["segfault"], workload=WORKLOADS / "dies_abruptly.py")
    crash = r.summary["crash"]
    assert (crash["kind"], crash["signal"], crash["step"]) == ("segfault", "SIGSEGV", 2)
    assert "PYTHONFAULTHANDLER=1" in crash["try_next"]


def test_a_script_that_stops_on_a_nan_loss(tmp_path):
    r = neurondesk_run(tmp_path, [], workload=WORKLOADS / "nan_stop.py")
    crash = r.summary["crash"]
    assert crash["kind"] == "nan", crash
    assert "FloatingPointError: loss is nan at step 3" in crash["evidence"]
    assert crash["step"] == 4  # died after its fourth step ended (0-based: in step 4)
    assert "clip gradients" in crash["try_next"]
