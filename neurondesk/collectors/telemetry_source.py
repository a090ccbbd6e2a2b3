"""What a telemetry source is: a name, a period, and an ``open`` that says whether the source is
there on this run (returning how to poll it) or not (None). A new source is a file that defines a
SourceSpec and one line in telemetry.SOURCES; collectors/telemetry.py gives each its own thread,
polls it, re-arms after the poll, and turns a failure into one notice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.core.events.run_events import Event

PollResult = Event | Iterable[Event] | None


@dataclass
class SourceContext:
    """What a source may look at when it opens: the run, the workload, the options."""

    root_pid: int
    env: dict[str, str]
    run_dir: Path | None = None
    neuron_observer: str | None = None  # Neuron Observer's /metrics URL
    graph_stats: str | None = None  # a folder of TorchNeuron graph_stats CSVs
    workload_pids: set[int] | None = field(default=None)  # the process tree's latest (for NVML)


@dataclass(frozen=True)
class Poller:
    poll: Callable[[], PollResult]
    close: Callable[[], None] | None = None


@dataclass(frozen=True)
class SourceSpec:
    name: str  # said in the notice when it fails: "<name> telemetry stopped: ..."
    period_s: float
    open: Callable[[SourceContext], Poller | None]  # None: nothing of this kind on this run
