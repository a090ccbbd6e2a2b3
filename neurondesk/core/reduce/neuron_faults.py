"""The Neuron failures the workload's output told (``NeuronFault``): kept per kind (bounded), with
every allocation log the runtime wrote, for one diagnostic per kind (core/findings/neuron_errors.py)."""

from __future__ import annotations

from neurondesk.core.events import device_events as dev

KEEP_PER_KIND = 50
MEM_LOGS_KEEP = 32


class NeuronFaults:
    def __init__(self) -> None:
        self.by_kind: dict[str, list[dev.NeuronFault]] = {}  # the first KEEP_PER_KIND of each kind
        self.counts: dict[str, int] = {}
        self.mem_logs: list[str] = []  # /tmp/nrt_mem_log_device_*.csv, in the order written

    def on_fault(self, e: dev.NeuronFault) -> None:
        if not e.fault:
            return
        self.counts[e.fault] = self.counts.get(e.fault, 0) + 1
        kept = self.by_kind.setdefault(e.fault, [])
        if len(kept) < KEEP_PER_KIND:
            kept.append(e)
        if e.mem_log and e.mem_log not in self.mem_logs and len(self.mem_logs) < MEM_LOGS_KEEP:
            self.mem_logs.append(e.mem_log)
