"""The workload's memory cgroup: its limit and its OOM-killer count, read as ``CgroupMemory`` events.

While the workload runs, its main process's cgroup is read from ``/proc/PID/cgroup`` (a launcher may
move itself into one right after it starts: ``systemd-run --scope``, a wrapper writing
``cgroup.procs``); the counts are taken then, as a baseline, and the cgroup is read again at every
poll. At the workload's exit it is read once more (``final``): an exited process's own
``/proc/PID/cgroup`` no longer names it, so the path seen while it ran is the one read.

cgroup v2 (``memory.max`` of it and its parents, ``memory.events``: ``oom_kill``, ``max``;
``memory.peak``, ``memory.current``) and v1 (``memory.limit_in_bytes`` of it and its parents,
``memory.oom_control``'s ``oom_kill`` (kernel 4.13+), ``memory.failcnt``, ``memory.max_usage_in_bytes``,
``memory.usage_in_bytes``), mounted wherever ``/proc/self/mountinfo`` says. The host's
``/proc/vmstat`` ``oom_kill`` is read as well: a kill in any cgroup of the host.
Never raises: what cannot be read is said in the event's ``error``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from neurondesk.core.events.device_events import CgroupMemory

V1_UNLIMITED = 1 << 62  # v1 says "no limit" with PAGE_COUNTER_MAX pages: 9223372036854771712 on x86-64
POLL_S = (0.05, 0.25, 0.5)  # the first reads soon after the start, then every 0.5 s


@dataclass(frozen=True)
class Mount:
    point: str
    root: str  # the folder of the hierarchy mounted there ("/" for the whole of it)
    fstype: str  # "cgroup" (v1) | "cgroup2"
    options: tuple[str, ...]  # super options: the v1 controllers ("memory")


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup mounts of a /proc/PID/mountinfo."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        out.append(Mount(point=_unescape(fields[4]), root=_unescape(fields[3]), fstype=tail[0],
                         options=tuple(tail[2].split(","))))
    return out


def _unescape(s: str) -> str:
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def parse_proc_cgroup(text: str) -> tuple[str | None, str | None]:
    """(the v1 memory hierarchy's path, the v2 path) of a /proc/PID/cgroup."""
    v1 = v2 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        elif "memory" in parts[1].split(","):
            v1 = parts[2]
    return v1, v2


def cgroup_folder(mount: Mount, path: str) -> str | None:
    """The folder of cgroup ``path`` under ``mount`` (None: the mount does not hold it)."""
    root = mount.root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None
    rest = path[len(root):].strip("/")
    return os.path.join(mount.point, rest) if rest else mount.point


def _read(folder: str, name: str) -> str | None:
    try:
        with open(os.path.join(folder, name), encoding="ascii", errors="replace") as f:
            return f.read(65536)
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def _keyed(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _int(value)
    return None


def _limit(folder: str, top: str, name: str, unlimited: Callable[[str], bool]) -> tuple[int | None, str]:
    """The tightest limit of ``folder`` and its parents up to ``top``, and the folder holding it."""
    best: tuple[int | None, str] = (None, "")
    while True:
        text = _read(folder, name)
        if text is not None and not unlimited(text.strip()):
            value = _int(text)
            if value is not None and (best[0] is None or value < best[0]):
                best = (value, folder)
        if folder.rstrip("/") == top.rstrip("/") or os.path.dirname(folder) == folder:
            return best
        folder = os.path.dirname(folder)


def read_folder(version: int, folder: str, top: str) -> dict:
    """The counts and limit of one cgroup folder (``top``: the mount point, where the walk up ends)."""
    if version == 2:
        limit, where = _limit(folder, top, "memory.max", lambda s: s == "max")
        events = _read(folder, "memory.events")
        return {"limit_bytes": limit, "limit_folder": where, "usage_bytes": _int(_read(folder, "memory.current")),
                "peak_bytes": _int(_read(folder, "memory.peak")), "oom_kills": _keyed(events, "oom_kill"),
                "limit_hits": _keyed(events, "max"), "exists": os.path.isdir(folder)}
    limit, where = _limit(folder, top, "memory.limit_in_bytes", lambda s: (_int(s) or 0) >= V1_UNLIMITED)
    return {"limit_bytes": limit, "limit_folder": where, "usage_bytes": _int(_read(folder, "memory.usage_in_bytes")),
            "peak_bytes": _int(_read(folder, "memory.max_usage_in_bytes")),
            "oom_kills": _keyed(_read(folder, "memory.oom_control"), "oom_kill"),
            "limit_hits": _int(_read(folder, "memory.failcnt")), "exists": os.path.isdir(folder)}


def locate(proc_cgroup: str, mounts: list[Mount]) -> tuple[int, str, str, Mount] | str:
    """(version, cgroup path, its folder, the mount) of the memory cgroup a /proc/PID/cgroup names,
    or why there is none."""
    v1, v2 = parse_proc_cgroup(proc_cgroup)
    if v1 is not None:
        for m in mounts:
            if m.fstype == "cgroup" and "memory" in m.options and (folder := cgroup_folder(m, v1)) is not None:
                return 1, v1, folder, m
    if v2 is not None:
        for m in mounts:
            if m.fstype == "cgroup2" and (folder := cgroup_folder(m, v2)) is not None:
                if "memory" in (_read(m.point, "cgroup.controllers") or "").split():
                    return 2, v2, folder, m
    return "no memory cgroup controller is mounted where this process can read it"


PF_EXITING = 0x4  # include/linux/sched.h: set as the process begins to exit, before it leaves its cgroups


def _exiting(stat: str) -> bool:
    """A /proc/PID/stat that says the process is exiting, a zombie, dead, or that says nothing."""
    fields = stat[stat.rfind(")") + 1:].split()
    if len(fields) < 7 or fields[0] in ("Z", "X", "x"):
        return True
    try:
        return bool(int(fields[6]) & PF_EXITING)
    except ValueError:
        return True


def _cgroup_path(mount: Mount, folder: str) -> str:
    """The cgroup path of a folder under ``mount`` (its hierarchy's name for it)."""
    rel = os.path.relpath(folder, mount.point)
    return os.path.normpath(os.path.join(mount.root, "" if rel == "." else rel))


class CgroupWatch:
    """The memory cgroup of process ``pid``: ``poll`` while it runs (an event when it is first seen
    in a cgroup or moves), ``final`` at its exit. ``proc``: the /proc folder (a test's copy)."""

    def __init__(self, pid: int, proc: str = "/proc") -> None:
        self.pid = pid
        self.proc = proc
        self.where: tuple[int, str, str, Mount] | None = None  # version, path, folder, mount
        self.base: dict = {}  # the counts when the cgroup was first read
        self.host_base = self._host_oom_kills()
        self.last: CgroupMemory | None = None
        self.why: str | None = None
        self.mounts: list[Mount] | None = None
        self.misses = 0  # polls in a row that found no memory cgroup

    def _host_oom_kills(self) -> int | None:
        return _keyed(_read(self.proc, "vmstat"), "oom_kill")

    def _reading(self, t: float, final: bool) -> CgroupMemory:
        version, path, folder, mount = self.where
        r = read_folder(version, folder, mount.point)
        host = self._host_oom_kills()

        def since(key: str) -> int | None:
            now, then = r[key], self.base.get(key)
            return None if now is None else now - (then or 0)

        held = r["limit_folder"]
        return CgroupMemory(
            t=t, pid=self.pid, path=path, version=version, limit_bytes=r["limit_bytes"],
            limit_path=_cgroup_path(mount, held) if held else "",
            usage_bytes=r["usage_bytes"], peak_bytes=r["peak_bytes"], oom_kills=since("oom_kills"),
            limit_hits=since("limit_hits"), final=final,
            host_oom_kills=None if host is None or self.host_base is None else host - self.host_base)

    def _mounts(self, fresh: bool) -> list[Mount]:
        """The cgroup mounts, read once (a big node has thousands of mounts: not at every poll)."""
        if fresh or self.mounts is None:
            self.mounts = parse_mountinfo(_read(os.path.join(self.proc, "self"), "mountinfo") or "")
        return self.mounts

    def poll(self, t: float) -> CgroupMemory | None:
        """A reading when the process is first seen in its cgroup or has moved to another; None otherwise."""
        folder = os.path.join(self.proc, str(self.pid))
        text = _read(folder, "cgroup")
        if text is None or _exiting(_read(folder, "stat") or ""):  # stat read after: what the cgroup was read in
            return None  # exiting (its cgroup is the root's from then on) or gone: the last reading stands
        try:
            where = locate(text, self._mounts(fresh=False))
            self.misses = self.misses + 1 if isinstance(where, str) else 0
            if self.misses % 20 == 1:  # none where it was looked for: mounted since? (read again now and then)
                where = locate(text, self._mounts(fresh=True))
        except (OSError, ValueError) as exc:
            where = f"{type(exc).__name__}: {exc}"
        if isinstance(where, str):
            self.why = where
            return None
        moved = self.where is None or where[1] != self.where[1]
        if moved:
            self.where = where
            self.base = read_folder(where[0], where[2], where[3].point)
        self.last = self._reading(t, final=False)
        return self.last if moved else None

    def final(self, t: float) -> CgroupMemory:
        """The reading at the workload's exit (counts since the first reading); never raises: the run's end
        is queued after it (collectors/workload.py)."""
        try:
            return self._final(t)
        except Exception as exc:  # noqa: BLE001 - a reading that fails says why, it never stops the run's end
            return CgroupMemory(t=t, pid=self.pid, final=True, error=f"{type(exc).__name__}: {exc}"[:300])

    def _final(self, t: float) -> CgroupMemory:
        if self.where is None:
            host = self._host_oom_kills()
            return CgroupMemory(t=t, pid=self.pid, final=True, error=self.why or "the workload's cgroup was never read",
                                host_oom_kills=None if host is None or self.host_base is None else host - self.host_base)
        if not os.path.isdir(self.where[2]) and self.last is not None:
            return replace(self.last, t=t, final=True, error=(
                f"the cgroup {self.where[1]} was removed when the workload exited: counts as of its last reading"))
        return self._reading(t, final=True)


def watch(cg: CgroupWatch, put: Callable[[CgroupMemory], None], stop: threading.Event) -> None:
    """Poll until ``stop`` is set: a thread's body (collectors/workload.py)."""
    waits = iter(POLL_S)
    wait = next(waits)
    while not stop.wait(wait):
        try:
            e = cg.poll(time.time())
        except Exception as exc:  # noqa: BLE001 - a reading that fails never stops the run
            cg.why = f"{type(exc).__name__}: {exc}"
            e = None
        if e is not None:
            put(e)
        wait = next(waits, POLL_S[-1])


