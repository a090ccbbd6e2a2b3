"""What the workload and the collectors send the recorder, made into events: the probe's lines
(decoded and validated), the workload's output lines (parsed), the output relay's totals, the
telemetry's samples (with the disk warnings they call for). Each event goes to ``record``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.probe_messages import ProbeDecoder
from neurondesk.collectors.workload import RawOutput, RawProbe, RawRelayStatus, relay_event
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.device_events import HostSample, ProcessTreeSample
from neurondesk.core.node.compile_wall import CompileWallWarnings
from neurondesk.core.node.disk import DiskSample, DiskWarnings, output_notice
from neurondesk.core.reduce.state import RunState
from neurondesk.core.view.read_views import compile_wall_view, disk_view
from neurondesk.store.rundir import RunPaths

STDERR_TAIL = 30
STDERR_TAIL_LINE = 2000  # characters kept of each of those lines


class Intake:
    def __init__(self, state: RunState, record: Callable[[ev.Event], None], paths: Callable[[], RunPaths]) -> None:
        self.state, self.record, self.paths = state, record, paths
        self.parser = OutputParser()
        self.probe_decoder = ProbeDecoder()
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.disk_warnings = DiskWarnings()  # free space / fill forecast: a notice once per episode
        self.wall_warnings = CompileWallWarnings()  # host memory emptied by a compile wall: once per wall

    def probe(self, item: RawProbe) -> None:
        refused = self.probe_decoder.refused
        for e in self.probe_decoder.decode(item.line, item.t):
            self.record(e)
        if refused == 0 and self.probe_decoder.refused:  # once: the rest are counted as parse problems
            self.record(ev.Notice(t=item.t, level="warn", source="probe", message=(
                "a probe message out of range was refused (see the journal's parse problems); "
                "such messages are counted, never believed")))

    def output(self, item: RawOutput) -> None:
        if item.stream == "stderr":
            # a traceback's line, not a 64 KiB one: the tail goes whole into the summary, which must fit a full disk
            self.stderr_tail.append(item.text if len(item.text) <= STDERR_TAIL_LINE else
                                    item.text[:STDERR_TAIL_LINE] + " …[cut]")
        for e in self.parser.feed(item.stream, item.text, item.t):
            self.record(e)

    def output_ended(self, t: float) -> None:
        for e in self.parser.flush(t):
            self.record(e)

    def telemetry(self, item: ev.Event) -> None:
        self.record(item)
        if isinstance(item, DiskSample):
            for text in self.disk_warnings.check(list(disk_view(self.state).filesystems)):
                self.record(ev.Notice(t=item.t, level="warn", source="disk", message=text))
        elif isinstance(item, HostSample | ProcessTreeSample):
            wall = compile_wall_view(self.state)
            text = self.wall_warnings.check(wall.memory, wall.compilers)
            if text is not None:
                self.record(ev.Notice(t=item.t, level="warn", source="compile-wall", message=text))

    def relay_status(self, item: RawRelayStatus) -> None:
        """The output relay's totals: journaled, and a notice when a stream's writes start failing
        or succeed again."""
        e = relay_event(item)
        if isinstance(e, ev.Notice) or e is None:
            if e is not None:
                self.record(e)
            return
        before = disk_view(self.state).output_of(e.stream)
        self.record(e)
        paths = self.paths()
        path = paths.stdout_log if e.stream == "stdout" else paths.stderr_log
        said = output_notice(before, e, str(path))
        if said is not None:
            self.record(ev.Notice(t=e.t, level=said[0], source="output", message=said[1]))
