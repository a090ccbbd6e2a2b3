"""The job this run belongs to (core/events/job_identity.py), from the recorder's variables and the workers' hellos."""

from __future__ import annotations

from collections.abc import Callable

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.job_identity import LAUNCH_VARS, JobIdentity, identify

# Variables every worker of one node must agree on; a disagreement is said, the first one kept.
_NODE_WIDE = ("TORCHELASTIC_RUN_ID", "GROUP_RANK", "GROUP_WORLD_SIZE", "WORLD_SIZE", "SLURM_JOB_ID")


class JobReducer:
    def __init__(self) -> None:
        self.host = ""
        self.job_flag: str | None = None
        self.node_flag: str | None = None
        self.env: dict[str, str] = {}  # the recorder's, then completed by the first worker that has them
        self.ranks: set[int] = set()
        self.problems: list[str] = []
        self._identity: JobIdentity | None = None

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"run_started": self.on_run_started, "process_attached": self.on_process_attached}

    def on_run_started(self, e: ev.RunStarted) -> None:
        self.host, self.job_flag, self.node_flag = e.host, e.job_flag, e.node_flag
        self.env = {k: v for k, v in e.launch_env.items() if k in LAUNCH_VARS} | self.env
        self._identity = None

    def on_process_attached(self, e: ev.ProcessAttached) -> None:
        worker = {k: v for k, v in e.launch_env.items() if k in LAUNCH_VARS}
        if not worker:
            return
        for name in _NODE_WIDE:
            mine, theirs = self.env.get(name), worker.get(name)
            if mine is not None and theirs is not None and mine != theirs and len(self.problems) < 8:
                self.problems.append(f"process {e.pid} says {name}={theirs[:64]!r}, another process of this "
                                     f"node said {mine[:64]!r}: the first is kept (two launches in one run?)")
        self.env = worker | self.env
        if e.rank is not None and "RANK" in worker:
            self.ranks.add(e.rank)
        self._identity = None

    def identity(self) -> JobIdentity:
        if self._identity is None:
            self._identity = identify(self.env, self.host, self.job_flag, self.node_flag, sorted(self.ranks),
                                      self.problems)
        return self._identity
