"""Host and process-tree sampling on real processes: multiprocessing workers (fork and spawn), a
compiler child named neuronx-cc, processes that vanish."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from neurondesk.collectors.devices.host import (
    HostSampler,
    ProcessTreeSampler,
    _assign_roles,
    cpu_info,
    descendants,
    proc_children,
)

WORKLOAD = """\
import multiprocessing as mp, sys, time

def work():
    time.sleep(60)

if __name__ == "__main__":
    ctx = mp.get_context(sys.argv[1])
    procs = [ctx.Process(target=work) for _ in range(2)]
    for p in procs:
        p.start()
    print("ready", flush=True)
    time.sleep(60)
"""


@contextmanager
def running(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_cpu_info_describes_this_machine() -> None:
    info = cpu_info()
    assert info["logical_cores"] == os.cpu_count()
    assert info["memory_total"] == psutil.virtual_memory().total
    assert info["arch"] and (
        info["physical_cores"] is None or info["physical_cores"] <= info["logical_cores"]
    )


def test_host_sampler_measures_per_core_load_between_samples() -> None:
    sampler = HostSampler()
    first = sampler.sample(t=1.0)
    assert first.t == 1.0 and first.cpu_percent is None and first.per_cpu_percent == []
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # keep one core busy so the interval is not empty
        pass
    second = sampler.sample()
    assert len(second.per_cpu_percent) == psutil.cpu_count()
    assert all(0.0 <= p <= 100.0 for p in second.per_cpu_percent)
    assert second.cpu_percent is not None and second.cpu_percent > 0.0
    assert 0 < second.memory_used <= second.memory_total


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_of_a_real_python_process(tmp_path: Path, method: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(WORKLOAD)
    with running([sys.executable, str(script), method]) as proc:
        sampler = ProcessTreeSampler(proc.pid)
        sampler.sample()
        time.sleep(0.2)
        s = sampler.sample(t=42.0)
        workers = [p for p in s.processes if p.role == "dataloader"]
        assert s.t == 42.0 and s.root_alive
        assert s.dataloader_workers == len(workers) == 2  # a resource tracker, if any, is not one
        assert {p.ppid for p in workers} == {proc.pid}
        assert all(p.rss > 0 and p.threads >= 1 for p in workers)
        main = next(p for p in s.processes if p.pid == proc.pid)
        assert main.role == "main" and s.total_rss >= main.rss + sum(p.rss for p in workers)
        assert s.compilers == []
        assert {p.role for p in s.processes} <= {"main", "dataloader", "helper"}


def test_compiler_child_named_neuronx_cc(tmp_path: Path) -> None:
    fake_cc = tmp_path / "neuronx-cc"
    shutil.copy("/bin/sleep", fake_cc)  # a copy, so the process name is neuronx-cc too
    launcher = (
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.argv[1], '30'])\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    sum(range(10000))\n"  # some CPU in the main process
    )
    with running([sys.executable, "-c", launcher, str(fake_cc)]) as proc:
        sampler = ProcessTreeSampler(proc.pid)
        sampler.sample()
        time.sleep(0.3)
        s = sampler.sample()
        (cc,) = s.compilers
        child = next(p for p in s.processes if p.pid == cc.pid)
        assert child.role == "compiler" and child.name == "neuronx-cc" and child.ppid == proc.pid
        assert cc.cmdline == f"{fake_cc} 30" and cc.elapsed_s >= 0.25
        assert s.dataloader_workers == 0  # a non-python child is not a DataLoader worker
        assert s.total_cpu_percent > 0


def test_vanished_children_and_a_vanished_root_are_fine() -> None:
    launcher = (
        "import os, subprocess, sys, time\n"
        "zombie = subprocess.Popen(['sleep', '0'])\n"  # exits at once, never reaped
        "os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)\n"  # it has exited: a zombie now
        "c = subprocess.Popen(['sleep', '60'])\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"  # the test has sampled the child alive
        "c.kill()\n"
        "c.wait()\n"
        "print('reaped', flush=True)\n"
        "time.sleep(60)\n"
    )
    with running([sys.executable, "-c", launcher]) as proc:
        sampler = ProcessTreeSampler(proc.pid)
        before = sampler.sample()
        assert proc.pid in [p.pid for p in before.processes] and 2 <= len(before.processes) <= 3
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "reaped"  # the second child has exited and been reaped
        after = sampler.sample()
        assert after.root_alive and [p.pid for p in after.processes] == [proc.pid]  # zombie left out
    gone = sampler.sample()
    assert not gone.root_alive and gone.processes == [] and gone.total_cpu_percent == 0.0


def _info(pid: int, ppid: int, name: str, cmdline: list[str]) -> dict:
    return {"pid": pid, "ppid": ppid, "name": name, "cmdline": cmdline}


def test_roles_under_torchrun_with_resource_tracker_and_compiler_subtree() -> None:
    py = "/venv/bin/python3.11"
    infos = [
        _info(1, 0, "torchrun", [py, "/venv/bin/torchrun", "--nproc_per_node=2", "train.py"]),
        _info(2, 1, "python3.11", [py, "-u", "train.py"]),
        _info(3, 1, "python3.11", [py, "-u", "train.py"]),
        _info(4, 2, "python3.11", [py, "-u", "train.py"]),  # forked DataLoader worker of rank 0
        _info(5, 3, "python3.11", [py, "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]),
        _info(6, 2, "python3.11", [py, "-c", "from multiprocessing.resource_tracker import main;main(8)"]),
        _info(7, 2, "neuronx-cc", [py, "/venv/bin/neuronx-cc", "compile", "--framework=XLA"]),
        _info(8, 7, "walrus_driver", ["walrus_driver", "-i", "x"]),  # the compiler's own child
        _info(9, 2, "sh", ["/bin/sh", "-c", "neuronx-cc compile model.hlo"]),
    ]
    _assign_roles(infos, root_pid=1)
    assert {i["pid"]: i["role"] for i in infos} == {
        1: "main", 2: "rank", 3: "rank", 4: "dataloader", 5: "dataloader",
        6: "helper", 7: "compiler", 8: "compiler", 9: "compiler",
    }  # fmt: skip


def test_a_process_named_pt_data_worker_is_a_dataloader_worker_wherever_it_hangs() -> None:
    py = "/venv/bin/python3.11"
    spawn = [py, "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]
    infos = [
        _info(1, 0, "python3.11", [py, "train.py"]),  # calls torch_xla.launch
        _info(2, 1, "python3.11", spawn),  # the training child (the reducer makes it a rank once it steps)
        _info(3, 2, "pt_data_worker", [py, "train.py"]),  # its forked DataLoader worker, renamed by torch
    ]
    _assign_roles(infos, root_pid=1)
    assert {i["pid"]: i["role"] for i in infos} == {1: "main", 2: "dataloader", 3: "dataloader"}


def test_the_tree_is_found_from_the_kernels_children_files_as_psutil_finds_it():
    """descendants() reads /proc/<pid>/task/*/children (a few files, not every process's stat):
    the same processes as psutil's children(recursive=True), a grandchild and a child started
    from a thread other than the main one included (the kernel lists it under that thread)."""
    script = ("import subprocess, threading, time\n"
              "kids = [subprocess.Popen(['sleep', '30'])]\n"
              "t = threading.Thread(target=lambda: kids.append(subprocess.Popen(['sh', '-c', 'sleep 30; :'])))\n"
              "t.start(); t.join(); print('ready', flush=True); time.sleep(30)\n")
    root = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline().strip() == "ready"
        proc = psutil.Process(root.pid)
        if proc_children(root.pid) is None:
            pytest.skip("this kernel has no /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN)")
        deadline = time.monotonic() + 30
        while len(proc.children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the shell starts its sleep a moment after it is started itself
        wanted = sorted(c.pid for c in proc.children(recursive=True))
        assert len(wanted) >= 3  # two children and the shell's sleep
        assert sorted(c.pid for c in descendants(proc)) == wanted
    finally:
        for c in psutil.Process(root.pid).children(recursive=True):
            c.kill()
        root.kill()
        root.wait()
