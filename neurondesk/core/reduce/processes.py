"""The workload's processes: which ones the probe attached to, which report steps, which one leads
(the first that reported a step: steady figures are its), and the device the training runs on. A restart
(core/reduce/attempts.py) hands the lead to the new attempt's first stepping process: the ranks of the
current attempt are the stepping ones (``world``), those before are kept in ``lead_pids`` and ``before``."""

from __future__ import annotations

from collections.abc import Callable

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.attempts import AttemptReducer


class ProcessReducer:
    def __init__(self, attempts: AttemptReducer | None = None) -> None:
        self._attempts = attempts or AttemptReducer()
        self.lead_pids: list[int] = []  # the lead of each attempt, in order (the last one is lead_pid)
        self.before = 0  # stepping processes of earlier attempts
        self.processes: dict[int, ev.ProcessAttached] = {}
        self.lead_pid: int | None = None
        self.step_pids: set[int] = set()
        self.device_kind: str | None = None
        self.device_name: str | None = None
        self.precision: str | None = None
        self.framework: str | None = None  # "TorchNeuron" (its native neuron device), with its version and cores
        self.framework_version: str | None = None
        self.cores: int | None = None
        self.blocked: ev.CollectiveBlocked | None = None  # the latest; core/flight_recorder.blocked_now reads it

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        # "step" is also the StepReducer's; this one runs first, so a step knows its lead
        return {"process_attached": self.on_process_attached, "device_seen": self.on_device_seen,
                "step": self.on_step, "steps": self.on_step,  # a StepBatch: only its pid is read here
                "probe_dropped": self.on_probe_dropped, "collective_blocked": self.on_collective_blocked}

    @property
    def world(self) -> int:
        return max(1, len(self.step_pids))

    def on_process_attached(self, e: ev.ProcessAttached) -> None:
        self.processes[e.pid] = e

    def on_collective_blocked(self, e: ev.CollectiveBlocked) -> None:
        self.blocked = e

    def on_device_seen(self, e: ev.DeviceSeen) -> None:
        if self.device_kind is None or self.lead_pid is None or e.pid == self.lead_pid:
            self.device_kind, self.device_name = e.device_kind, e.device_name
            self.framework, self.framework_version, self.cores = e.framework, e.framework_version, e.cores
            if e.precision:
                self.precision = e.precision

    def on_probe_dropped(self, e: ev.ProbeDropped) -> None:
        """A process that ended steps is a stepping process, even one none of whose steps arrived
        (it died with its first batch: collectors/probe_lifelines.py)."""
        if e.steps > 0:
            self.on_step(e)

    def on_step(self, e: ev.StepEnded | ev.StepBatch | ev.ProbeDropped) -> None:
        pid = e.pid
        if pid != self.lead_pid:
            attempts = self._attempts
            if self.lead_pid is not None and attempts.is_old(self.lead_pid) and not attempts.is_old(pid):
                self.before += len(self.step_pids)  # a restart: the new attempt's ranks replace the old
                self.step_pids, self.lead_pid = set(), None
            elif attempts.is_old(pid):
                return  # a late step of an attempt already replaced
            self.step_pids.add(pid)
            if self.lead_pid is None:
                self.lead_pid = pid
                self.lead_pids.append(pid)
