"""What the console polls: a live RunSession, or a ReplaySource (neurondesk.replay).

Both offer `state`, `poll()`, `done`, `now()`, `stop()`, `export_summary()`, `finish()` and a
`live` flag; the app knows nothing else about where events come from.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.replay import ReplaySource
from neurondesk.session import RunSession

__all__ = ["LiveSource", "ReplaySource"]

CLOSE_TIMEOUT_S = 20.0  # longer than the stop escalation (SIGINT, 10 s, SIGTERM, 5 s, SIGKILL)


class LiveSource:
    live = True

    def __init__(self, session: RunSession, clock: Callable[[], float] = time.time) -> None:
        self.session = session
        self.clock = clock
        self.started = False

    @property
    def state(self):
        return self.session.state

    @property
    def label(self) -> str:
        return f"run folder {self.session.paths.dir}" if self.session.paths else ""

    def start(self) -> None:
        """Start the workload, exactly once."""
        if not self.started:
            self.started = True
            self.session.start()

    def poll(self, max_items: int = 20_000) -> int:
        if not self.started or self.session.done:
            return 0
        return self.session.pump(max_items=max_items)

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def running(self) -> bool:
        w = self.session.workload
        return not self.session.done and w is not None and w.running()

    def now(self) -> float:
        return self.clock()

    def stop(self) -> str:
        if self.session.done or not self.running:
            return "the workload has already exited"
        self.session.stop()
        return "stopping the workload: SIGINT now, SIGTERM after 10 s, SIGKILL 5 s later"

    def export_summary(self) -> Path:
        self.session.export_summary(self.clock())
        return self.session.paths.summary_json

    def finish(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """On the way out: stop a workload that still runs, take in what it says while it exits,
        then let the session write the summary and index row (once: finish() is idempotent)."""
        s = self.session
        if not self.started or s.done:
            return
        if self.running:
            s.stop()
        deadline = time.monotonic() + timeout_s
        while not s.done and time.monotonic() < deadline:
            s.pump(timeout=0.1)
        s.finish()
