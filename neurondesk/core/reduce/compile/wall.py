"""CompileWallReducer: the host's available memory and the compiler processes of the workload, for the
compile wall's warning (core/node/compile_wall.py holds the rule and the words; this keeps the state)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from neurondesk.core.events.device_events import HostSample, ProcessTreeSample
from neurondesk.core.node.compile_wall import WINDOW_S, CompileWallMemory, compile_wall_memory

KEPT = 64  # host samples (1 Hz): twice the window


class CompileWallReducer:
    def __init__(self) -> None:
        self.available: deque[tuple[float, int]] = deque(maxlen=KEPT)  # (time, host bytes available)
        self.compilers = 0  # compiler processes at the latest process sample
        self.compilers_rss = 0
        self.peak_compilers = 0  # the most seen at once, over the run

    def handlers(self) -> dict[str, Callable]:
        return {"host_sample": self.on_host_sample, "process_tree": self.on_process_tree}

    def on_host_sample(self, e: HostSample) -> None:
        if e.memory_total > 0:  # a sample that read the memory
            self.available.append((e.t, e.memory_available))

    def on_process_tree(self, e: ProcessTreeSample) -> None:
        self.compilers = len(e.compilers)
        self.compilers_rss = sum(p.rss for p in e.processes if p.role == "compiler")
        self.peak_compilers = max(self.peak_compilers, self.compilers)

    def figure(self) -> CompileWallMemory | None:
        """The warning now, over the samples of the latest window (None: nothing to say)."""
        if not self.compilers or not self.available:
            return None
        latest = self.available[-1][0]
        return compile_wall_memory([p for p in self.available if latest - p[0] <= WINDOW_S], self.compilers,
                                   self.compilers_rss)
