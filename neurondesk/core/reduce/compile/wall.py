"""CompileWallReducer: the host's available memory and the compiler processes of the workload, for the
compile wall's warning (core/node/compile_wall.py holds the rule and the words; this keeps the state)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from neurondesk.core.events.device_events import CgroupMemory, HostSample, ProcessTreeSample
from neurondesk.core.node.compile_wall import CGROUP, HOST, CompileWallMemory, compile_wall_memory

KEPT = 64  # samples (1 Hz): twice compile_wall.WINDOW_S, which the fit keeps to


class CompileWallReducer:
    def __init__(self) -> None:
        self.available: deque[tuple[float, int]] = deque(maxlen=KEPT)  # (time, host bytes available)
        self.compilers = 0  # compiler processes at the latest process sample
        self.compilers_rss = 0
        self.cgroup_limit: int | None = None  # the workload's cgroup memory limit, where it has one
        self.under_limit: deque[tuple[float, int]] = deque(maxlen=KEPT)  # (time, that limit less the tree's RSS)

    def handlers(self) -> dict[str, Callable]:
        return {"host_sample": self.on_host_sample, "process_tree": self.on_process_tree,
                "cgroup_memory": self.on_cgroup}

    def on_cgroup(self, e: CgroupMemory) -> None:
        if e.limit_bytes:
            self.cgroup_limit = e.limit_bytes

    def on_host_sample(self, e: HostSample) -> None:
        if e.memory_total > 0:  # a sample that read the memory
            self.available.append((e.t, e.memory_available))

    def on_process_tree(self, e: ProcessTreeSample) -> None:
        self.compilers = len(e.compilers)
        self.compilers_rss = sum(p.rss for p in e.processes if p.role == "compiler")
        if self.cgroup_limit and e.processes:
            self.under_limit.append((e.t, self.cgroup_limit - e.total_rss))

    def figure(self) -> CompileWallMemory | None:
        """The warning now, over the samples of the latest window: the host's memory or the cgroup's
        limit, whichever runs out sooner (None: nothing to say)."""
        said = []
        for points, limit in ((self.available, HOST), (self.under_limit, CGROUP)):
            f = compile_wall_memory(points, self.compilers, self.compilers_rss, limit)
            if f is not None:
                said.append(f)
        return min(said, key=lambda f: f.full_in_s, default=None)
