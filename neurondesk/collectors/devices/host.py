"""The host through psutil: CPU model, cores, memory, per-core load, and the workload's process tree.

Samplers keep their own previous readings (no psutil module-level state), so two samplers never
disturb each other. A process that vanishes in the middle of a sample is simply left out.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import psutil

from neurondesk.core.events.device_events import CompilerProcess, HostSample, ProcessInfo, ProcessTreeSample

LAUNCHER_MARKERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
# How multiprocessing starts a worker: spawn/forkserver put these in the child's command line;
# fork leaves the parent's command line (handled by the python-child rule below).
WORKER_MARKERS = (
    "from multiprocessing.spawn import",
    "from multiprocessing.forkserver import",
    "--multiprocessing-fork",
)
HELPER_MARKERS = ("from multiprocessing.resource_tracker import", "from multiprocessing.semaphore_tracker")
COMPILER_NAME = "neuronx-cc"
# torch's DataLoader worker loop names its process this (torch.utils.data._utils.worker); a process
# spawned by torch_xla.launch carries the same multiprocessing marker as a worker but never this
# name. The reducer settles the rest: a process that reports steps is a rank (core/reduce/telemetry).
DATALOADER_NAME = "pt_data_worker"
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def cpu_info() -> dict[str, Any]:
    return {
        "model": cpu_model(),
        "arch": platform.machine(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_total": psutil.virtual_memory().total,
    }


def _busy_percent(prev: Any, cur: Any) -> float:
    def split(ct: Any) -> tuple[float, float]:
        d = ct._asdict()
        # guest time is already counted in user on Linux (psutil does the same subtraction)
        total = sum(d.values()) - d.get("guest", 0.0) - d.get("guest_nice", 0.0)
        return total, d.get("idle", 0.0) + d.get("iowait", 0.0)

    (t0, i0), (t1, i1) = split(prev), split(cur)
    dt = t1 - t0
    return 0.0 if dt <= 0 else round(max(0.0, min(100.0, 100.0 * (1 - (i1 - i0) / dt))), 2)


class HostSampler:
    """Machine-wide and per-core CPU % between two ``sample()`` calls, plus memory."""

    def __init__(self) -> None:
        self._last: tuple[Any, list[Any]] | None = None

    def sample(self, t: float | None = None) -> HostSample:
        total, per = psutil.cpu_times(), psutil.cpu_times(percpu=True)
        cpu, per_pct = None, []
        if self._last is not None and len(self._last[1]) == len(per):
            cpu = _busy_percent(self._last[0], total)
            per_pct = [_busy_percent(a, b) for a, b in zip(self._last[1], per, strict=True)]
        self._last = (total, per)
        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
        return HostSample(
            t=time.time() if t is None else t,
            cpu_percent=cpu,
            per_cpu_percent=per_pct,
            memory_total=vm.total,
            memory_used=vm.total - vm.available,
            memory_available=vm.available,
            swap_total=sw.total,
            swap_used=sw.used,
        )


def _is_python(info: dict[str, Any]) -> bool:
    argv0 = os.path.basename(info["cmdline"][0]) if info["cmdline"] else ""
    return info["name"].startswith("python") or argv0.startswith("python")


def _is_compiler(info: dict[str, Any]) -> bool:
    if COMPILER_NAME in info["name"]:
        return True
    # argv[0], "python .../neuronx-cc compile", or "sh -c 'neuronx-cc ...'"
    return any(
        os.path.basename(tok).startswith(COMPILER_NAME) for arg in info["cmdline"] for tok in arg.split()
    )


def proc_children(pid: int) -> list[int] | None:
    """The direct children of ``pid``, from /proc/<pid>/task/*/children (Linux): a few small files,
    where psutil's children() reads the stat file of every process on the machine (400 of them a
    second on a shared host). None where the kernel has no such files (the caller asks psutil)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # that thread ended meanwhile
            return None  # a kernel without CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return out


def descendants(root: psutil.Process) -> list[psutil.Process]:
    """Every process under ``root``, parents before their children; gone ones left out."""
    if proc_children(root.pid) is None:
        return root.children(recursive=True)
    found: list[psutil.Process] = []
    todo = [root.pid]
    while todo:
        for pid in proc_children(todo.pop()) or []:
            try:
                found.append(psutil.Process(pid))
            except _GONE:
                continue
            todo.append(pid)
    return found


class ProcessTreeSampler:
    """Samples ``root_pid`` and its descendants. CPU % of a process is measured from the previous
    sample, so a process seen for the first time reads 0.0."""

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self._procs: dict[int, psutil.Process] = {}

    def _process(self, p: psutil.Process) -> psutil.Process:
        cached = self._procs.get(p.pid)
        if cached is None or cached != p:  # Process equality includes create_time: pid reuse
            self._procs[p.pid] = cached = p
        return cached

    def _read(self, p: psutil.Process, now: float) -> dict[str, Any] | None:
        try:
            with p.oneshot():
                cpu_times = p.cpu_times()
                created = p.create_time()
                return {
                    "pid": p.pid,
                    "ppid": p.ppid(),
                    "name": p.name(),
                    "cmdline": p.cmdline(),
                    "cpu_percent": round(p.cpu_percent(None), 2),
                    "cpu_time_s": round(cpu_times.user + cpu_times.system, 3),
                    "rss": p.memory_info().rss,
                    "threads": p.num_threads(),
                    "elapsed_s": round(max(0.0, now - created), 3),
                }
        except _GONE:
            return None

    def sample(self, t: float | None = None) -> ProcessTreeSample:
        now = time.time()
        t = now if t is None else t
        try:
            root = self._process(psutil.Process(self.root_pid))
            tree = [root, *(self._process(c) for c in descendants(root))]
        except _GONE:
            self._procs.clear()
            return ProcessTreeSample(t=t, root_pid=self.root_pid, root_alive=False)
        infos = [i for i in (self._read(p, now) for p in tree) if i is not None]
        seen = {i["pid"] for i in infos}
        for pid in list(self._procs):
            if pid not in seen:
                del self._procs[pid]
        _assign_roles(infos, self.root_pid)
        workers = [i for i in infos if i["role"] == "dataloader"]
        compilers = [
            CompilerProcess(pid=i["pid"], cpu_percent=i["cpu_percent"], cpu_time_s=i["cpu_time_s"],
                            elapsed_s=i["elapsed_s"], cmdline=" ".join(i["cmdline"]))
            for i in infos
            if i["role"] == "compiler" and _is_compiler(i)
        ]
        processes = [ProcessInfo(**{k: v for k, v in i.items() if k != "cmdline"}) for i in infos]
        return ProcessTreeSample(
            t=t,
            root_pid=self.root_pid,
            root_alive=any(i["pid"] == self.root_pid for i in infos),
            processes=processes,
            total_cpu_percent=round(sum(i["cpu_percent"] for i in infos), 2),
            total_rss=sum(i["rss"] for i in infos),  # forked workers share pages: an upper bound
            dataloader_workers=len(workers),
            dataloader_cpu_percent=round(sum(i["cpu_percent"] for i in workers), 2),
            compilers=compilers,
        )


def _assign_roles(infos: list[dict[str, Any]], root_pid: int) -> None:
    by_pid = {i["pid"]: i for i in infos}
    root = by_pid.get(root_pid)
    launcher = root is not None and any(m in " ".join(root["cmdline"]) for m in LAUNCHER_MARKERS)
    training = {root_pid}
    if launcher:  # torchrun: the ranks are its python children
        training = {i["pid"] for i in infos if i["ppid"] == root_pid and _is_python(i)}

    def under_compiler(i: dict[str, Any]) -> bool:
        seen: set[int] = set()
        while i is not None and i["pid"] not in seen:
            if i["pid"] != root_pid and _is_compiler(i):
                return True
            seen.add(i["pid"])
            i = by_pid.get(i["ppid"])
        return False

    for i in infos:
        joined = " ".join(i["cmdline"])
        parent = by_pid.get(i["ppid"])
        if i["pid"] == root_pid:
            i["role"] = "main"
        elif under_compiler(i):
            i["role"] = "compiler"
        elif launcher and i["pid"] in training:
            i["role"] = "rank"
        elif any(m in joined for m in HELPER_MARKERS):
            i["role"] = "helper"
        elif i["name"] == DATALOADER_NAME or any(m in joined for m in WORKER_MARKERS):
            i["role"] = "dataloader"
        elif i["ppid"] in training and parent is not None and (_is_python(i) or i["name"] == parent["name"]):
            i["role"] = "dataloader"  # fork start method: a python child of a training process
        else:
            i["role"] = "other"
