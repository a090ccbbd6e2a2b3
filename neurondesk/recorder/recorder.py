"""The recorder: owns one run. It starts the workload and the telemetry collectors, decodes what
they send, appends every event to the journal *before* reducing it, and at the end writes the
summary files and the index row. Viewers (console, headless line) follow the journal; none of
them can stop this process by dying, and this process dying cannot stop the workload.

Everything that reaches the run state goes through ``record()``: journal, then reduce. Notices
are events like any other, so a replay of the journal is the live run, notices included.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import sys
import time
from collections import deque
from pathlib import Path

from neurondesk.collectors.devices.neuron_monitor import process_tag
from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.probe_lifelines import death_signal, read_step_counts
from neurondesk.collectors.probe_messages import ProbeDecoder
from neurondesk.collectors.telemetry import Telemetry
from neurondesk.collectors.workload import (
    RawExit,
    RawOutput,
    RawProbe,
    RawRelayStatus,
    WorkloadProcess,
    relay_event,
    user_debug_notice,
)
from neurondesk.core import events as ev
from neurondesk.core.disk import DiskSample, DiskWarnings, output_notice
from neurondesk.core.state import RunState
from neurondesk.core.summary import build_summary
from neurondesk.recorder.checkpointing import Checkpointer
from neurondesk.recorder.control import SIGNALS, ControlRequest, ControlServer
from neurondesk.recorder.disk_full import DiskFullFallback
from neurondesk.recorder.metrics import default_node
from neurondesk.recorder.metrics_http import MetricsExporter, parse_metrics_addr
from neurondesk.recorder.notify import AlertDesk
from neurondesk.recorder.options import RunOptions
from neurondesk.recorder.pending_row import FINISH_INDEX_PATIENCE_S, pending_words, write_pending_row
from neurondesk.reports.summary_writer import to_json, to_markdown  # text only
from neurondesk.store.index import RunIndex, RunIndexBusy
from neurondesk.store.journal import JournalError, JournalWriter
from neurondesk.store.live_registry import Registration, RegistryRefused, folder_now, register, registry_dir
from neurondesk.store.liveness import (
    LOCK_TAKEN_EXIT,
    FolderTaken,
    RecorderInfo,
    RecorderLock,
    write_recorder_info,
)
from neurondesk.store.run_ids import run_id_for
from neurondesk.store.rundir import INDEX_FILE, RunPaths, default_run_root
from neurondesk.store.summary_files import write_summary_files
from neurondesk.store.write_errors import advice, cause_errno, is_disk_full

STDERR_TAIL = 30
STDERR_TAIL_LINE = 2000  # characters kept of each of those lines
PUMP_BATCH = 5000


class Stopped(Exception):
    """The recorder was told to go down (SIGTERM to itself); the workload runs on."""


class Recorder:
    def __init__(self, command: list[str], options: RunOptions, paths: RunPaths) -> None:
        self.command = list(command)
        self.options = options
        self.paths = paths
        self.run_id = run_id_for(paths.dir, options.run_root or default_run_root())  # unique, whatever the folder's name
        self.state = RunState()
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.parser = OutputParser()
        self.probe_decoder = ProbeDecoder()
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.journal: JournalWriter | None = None
        self.workload: WorkloadProcess | None = None
        self.telemetry: Telemetry | None = None
        self.control: ControlServer | None = None
        self.lock: RecorderLock | None = None
        self.exit_code: int | None = None
        self.done = False
        self.summary_written = False
        self.journal_error: str | None = None
        self.stop_requested: str | None = None
        self.disk = DiskFullFallback(paths, self.run_id)  # where the run goes when its disk is full
        self.metrics: MetricsExporter | None = None
        self.checkpoints = Checkpointer(paths.dir)  # the reduced state beside the journal, for readers
        self._rotation_said: str | None = None
        self.disk_warnings = DiskWarnings()  # free space / fill forecast: a notice once per episode
        self.registration: Registration | None = None  # this run's entry among the live runs
        self.row_pending: tuple[Path, dict] | None = None  # (index, summary): the row a locked index refused
        self.alerts = AlertDesk(options, self.run_id, self.record, self.queue.put, self._stop_workload)

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        self.lock = RecorderLock(self.paths.dir)
        unregistered = self._register()  # before the journal: a run `run --detach` printed is listed
        self.journal = JournalWriter(self.paths.events)
        o = self.options
        self.probe_decoder.started_t = time.time()  # probe durations and times are bounded by the run's wall time
        self.record(ev.RunStarted(
            t=self.probe_decoder.started_t, run_id=self.run_id, command=self.command, cwd=o.cwd or os.getcwd(),
            host=socket.gethostname(), instance_type=o.instance_type, price_per_hour=o.price_per_hour,
            price_source=o.price_source, warmup_steps=o.warmup_steps, target_loss=o.target_loss,
            samples_per_step=o.samples_per_step, tokens_per_step=o.tokens_per_step,
            steps_requested=o.steps_requested, budget_usd=o.budget_usd, hang_after_s=o.hang_after_s))
        if unregistered:
            self.record(ev.Notice(t=time.time(), level="warn", source="registry", message=unregistered))
        debug = user_debug_notice(dict(os.environ if o.env is None else o.env))
        if debug:
            self.record(ev.Notice(t=time.time(), level="warn", source="xla-debug", message=debug))
        self.flush()
        tag = process_tag(self.run_id)
        self.workload = WorkloadProcess(self.command, self.queue, cwd=o.cwd, env=o.env, tag=tag,
                                        neuron_profile=o.neuron_profile,
                                        stdout_path=self.paths.stdout_log, stderr_path=self.paths.stderr_log)
        try:
            self.workload.start()
        except Exception as exc:
            self.record(ev.Notice(t=time.time(), level="error", message=str(exc)))
            self.record(ev.RunFinished(t=time.time(), exit_code=127))
            self.finish()
            raise
        if self.workload.relay_problem:
            self.record(ev.Notice(t=time.time(), level="warn", source="output", message=(
                f"{self.workload.relay_problem}: the workload writes into {self.paths.stdout_log.name} and "
                f"{self.paths.stderr_log.name} itself, so a full or read-only disk there can fail its writes")))
        self._start_metrics()
        self.control = ControlServer(os.path.join(self.workload.sock_dir, "control.sock"), self.queue.put)
        self.control.start()
        write_recorder_info(self.paths.dir, RecorderInfo(os.getpid(), self.control.path, self.workload.pid))
        if o.telemetry:
            try:
                self.telemetry = Telemetry(self.queue.put, tag=tag, env=o.env, run_dir=self.paths.dir,
                                           neuron_monitor_replay=o.neuron_monitor_replay,
                                           neuron_observer=o.neuron_observer, graph_stats=o.graph_stats)
                self.telemetry.start(self.workload.pid)
            except Exception as exc:  # noqa: BLE001 - telemetry is extra; the run goes on without it
                self.record(ev.Notice(t=time.time(), level="warn", source="telemetry",
                                      message=f"telemetry not started: {exc!r}"))

    def _register(self) -> str | None:
        """This run's entry in the registry of live runs (so `ls`/`attach ID` find it wherever its
        folder is). Why not, when it could not be written: the run goes on without it."""
        registry = registry_dir(self.options.run_root or default_run_root())
        try:
            self.registration = register(registry, self.run_id, self.paths.dir, self.lock.fd, os.getpid(), time.time())
        except (RegistryRefused, OSError) as exc:
            why = str(exc) if isinstance(exc, RegistryRefused) else f"cannot write in {registry}: {exc.strerror or exc}"
            return (f"this run is not in the registry of live runs ({why}); `neurondesk ls` and `attach ID` "
                    f"find it only under its folder: `neurondesk attach {self.paths.dir}`")
        return None

    def _follow_moved_folder(self) -> None:
        """Its folder was moved while the run was live: the summary and the index row go where it is now."""
        now = folder_now(self.paths.dir, self.lock.fd) if self.lock is not None and self.lock.fd >= 0 else None
        if now is None or now == self.paths.dir:
            return
        self.record(ev.Notice(t=time.time(), level="warn", source="registry", message=(
            f"the run folder was moved while the run was live: {self.paths.dir} is now {now}; "
            "its summary and index row are written there")))
        self.paths = self.disk.paths = RunPaths(now)

    def unregister(self) -> None:
        if self.registration is not None:
            self.registration.remove()

    def _start_metrics(self) -> None:
        """--metrics-addr: served from this process, so the metrics outlive any viewer. A port that
        cannot be bound is journaled; the run goes on without metrics."""
        o = self.options
        if not o.metrics_addr:
            return
        try:
            exporter = MetricsExporter(parse_metrics_addr(o.metrics_addr), o.job_id, o.node or default_node())
            exporter.start()
        except (OSError, ValueError) as exc:
            self.record(ev.Notice(t=time.time(), level="error", source="metrics",
                                  message=f"metrics not served on {o.metrics_addr}: {exc}"))
            return
        self.metrics = exporter
        exporter.publish(self.state, time.time(), force=True)

    # ------------------------------------------------------------------ events
    def record(self, e: ev.Event) -> None:
        """Journal first (an event that cannot be reduced is still on disk), then reduce."""
        try:
            self.journal.write(e)  # keeps the event buffered even when the flush it triggers fails
        except JournalError as exc:
            self._journal_trouble(exc)
        self.state.apply(e)

    def _journal_trouble(self, exc: JournalError) -> None:
        if self.journal_error is None:
            self.journal_error = str(exc)
            self.record(ev.Notice(t=time.time(), level="error", message=self._journal_words(exc)))
        self.journal_error = str(exc)
        if self.disk.over_bound(self.journal):
            self._divert("the events kept in memory reached their bound")

    def _journal_words(self, exc: JournalError) -> str:
        """The journal's own words for a full disk; for any other cause (a permission, a read-only
        filesystem) words that do not send the user to free disk space."""
        code = cause_errno(exc)
        if code is None or is_disk_full(code):
            return str(exc)
        self.disk.cause = code
        strerror = os.strerror(code)
        return (f"cannot write the event journal {self.paths.events}: {strerror}; "
                f"{advice(code, str(self.paths.events))}. The events not written are kept in memory and written "
                "when it can be written again; if it cannot by the end of the run, they go to a fallback "
                "folder named then")

    def _divert(self, why: str) -> bool:
        """The run folder's disk is full: the journal goes on in a fallback folder. True when it did."""
        notice = self.disk.divert(self.journal, why)
        if notice is None:
            self.journal_error = self.disk.error
            return False
        self.journal_error = None
        self.record(ev.Notice(t=time.time(), level="error", message=notice))
        return True

    def flush(self) -> None:
        try:
            self.journal.flush()
            self.journal_error = None
        except JournalError as exc:  # disk full: events stay buffered in memory; said once
            self._journal_trouble(exc)
            return
        self._checkpoint()

    def _checkpoint(self, force: bool = False) -> None:
        """After a flush: a checkpoint when one is due; a failed one or a failed segment rotation is
        said once (the journal has every event either way)."""
        for words in (self.checkpoints.after_flush(self.state, self.journal, force=force),
                      self._new_rotation_problem()):
            if words and not self.done:
                self.record(ev.Notice(t=time.time(), level="warn", source="journal", message=words))

    def _new_rotation_problem(self) -> str | None:
        words = self.journal.rotation_problem
        if words is None or words == self._rotation_said:
            return None
        self._rotation_said = words
        return words

    def pump(self, timeout: float = 0.1) -> int:
        """Handle what has arrived (waiting up to ``timeout`` for the first item), then flush, so
        viewers see it at once. Returns the number of items handled."""
        n = 0
        while n < PUMP_BATCH:
            try:
                item = self.queue.get(timeout=timeout) if n == 0 else self.queue.get_nowait()
            except queue.Empty:
                break
            n += 1
            try:
                self.handle(item)
            except Exception as exc:  # noqa: BLE001 - one bad item never ends the recording
                self.record(ev.Notice(t=time.time(), level="error",
                                      message=f"neurondesk could not take in a {type(item).__name__}: {exc!r}"))
        if n and not self.done:
            self.flush()
        return n

    def handle(self, item) -> None:
        if isinstance(item, RawProbe):
            refused = self.probe_decoder.refused
            for e in self.probe_decoder.decode(item.line, item.t):
                self.record(e)
            if refused == 0 and self.probe_decoder.refused:  # once: the rest are counted as parse problems
                self.record(ev.Notice(t=item.t, level="warn", source="probe", message=(
                    "a probe message out of range was refused (see the journal's parse problems); "
                    "such messages are counted, never believed")))
        elif isinstance(item, RawOutput):
            if item.stream == "stderr":
                # a traceback's line, not a 64 KiB one: the tail goes whole into the summary, which must fit a full disk
                self.stderr_tail.append(item.text if len(item.text) <= STDERR_TAIL_LINE else
                                        item.text[:STDERR_TAIL_LINE] + " …[cut]")
            for e in self.parser.feed(item.stream, item.text, item.t):
                self.record(e)
        elif isinstance(item, ControlRequest):
            self._control(item)
        elif isinstance(item, RawRelayStatus):
            if not self.done:  # after the end: the relay of a process left running
                self._relay_status(item)
        elif isinstance(item, ev.Event):  # from the telemetry collectors
            if not self.done:
                self.record(item)
                if isinstance(item, DiskSample):
                    for text in self.disk_warnings.check(self.state.parts.disk.filesystems()):
                        self.record(ev.Notice(t=item.t, level="warn", source="disk", message=text))
        elif isinstance(item, RawExit):
            for e in self.parser.flush(item.t):
                self.record(e)
            if self.workload is not None:  # steps a probe counted but never sent: its process died with them
                for e in self.probe_decoder.unsent(read_step_counts(self.workload.sock_dir), item.t):
                    self.record(e)
            self.exit_code = item.code
            sent = self.workload.sent_signal if self.workload else None
            self.record(ev.RunFinished(t=item.t, exit_code=item.code, signal=sent or death_signal(item.code),
                                       stderr_tail=list(self.stderr_tail),
                                       left_running=[ev.LeftProcess(p.pid, p.command) for p in item.left_running]))
            self.finish()

    def _relay_status(self, item: RawRelayStatus) -> None:
        """The output relay's totals: journaled, and a notice when a stream's writes start failing
        or succeed again."""
        e = relay_event(item)
        if isinstance(e, ev.Notice) or e is None:
            if e is not None:
                self.record(e)
            return
        before = self.state.parts.disk.output.get(e.stream)
        self.record(e)
        path = self.paths.stdout_log if e.stream == "stdout" else self.paths.stderr_log
        said = output_notice(before, e, str(path))
        if said is not None:
            self.record(ev.Notice(t=e.t, level=said[0], source="output", message=said[1]))

    def _control(self, req: ControlRequest) -> None:
        if req.op == "export":
            try:
                self.export_summary()
                req.answer(True, str(self.paths.summary_json))
            except OSError as exc:
                req.answer(False, f"cannot write the summary in {self.paths.dir}: {exc.strerror or exc}")
            return
        w = self.workload
        if self.done or w is None or not w.running():
            req.answer(False, "the workload has already exited")
        elif req.op == "stop":
            w.stop()
            req.answer(True, "stopping the workload: SIGINT now, SIGTERM after 10 s, SIGKILL 5 s later")
        elif req.args.get("sig") in SIGNALS:
            w.signal(getattr(signal, req.args["sig"]))
            req.answer(True, f"{req.args['sig']} sent to the workload")
        else:
            req.answer(False, f"cannot send {req.args.get('sig')!r}; expected one of {', '.join(SIGNALS)}")

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        """Record until the workload exits (or this recorder is told to stop). Returns the
        workload's exit status as a shell would give it."""
        while not self.done:
            if self.stop_requested:
                self._stop_recording(self.stop_requested)
                break
            self.pump(timeout=0.1)
            if not self.done:
                self.alerts.poll(self.state, time.time())  # hang, budget, compile walls ... (recorder/notify.py)
            if self.metrics is not None:  # this thread owns the state: snapshot here, scrapes read it
                self.metrics.publish(self.state, time.time())
        if self.metrics is not None:
            self.metrics.publish(self.state, time.time(), force=True)
            self.metrics.close()
        code = self.exit_code
        if code is None:
            return 1
        return 128 - code if code < 0 else code

    def request_stop(self, why: str) -> None:
        """From a signal handler: only sets a flag; the loop acts on it."""
        self.stop_requested = why

    def _stop_recording(self, why: str) -> None:
        """The recorder goes down, the workload does not: say so in the journal, write what we have."""
        pid = self.workload.pid if self.workload else None
        self.record(ev.Notice(
            t=time.time(), level="error",
            message=(f"the recorder stopped ({why}) while the workload (pid {pid}) still ran; it runs on "
                     f"unrecorded, its output goes on into {self.paths.stdout_log.name} and "
                     f"{self.paths.stderr_log.name}")))
        self.finish()

    def summary(self, now: float | None = None) -> dict:
        return build_summary(self.state, now)

    def export_summary(self, now: float | None = None) -> dict:
        """Write summary.json and summary.md now (the run may still be going)."""
        s = self.summary(now)
        write_summary_files(self.paths, to_json(s), to_markdown(s))
        return s

    def finish(self) -> None:
        """Idempotent: write the summary and the index row once, then close the journal. Every
        problem met on the way is journaled before the journal closes."""
        if self.done:
            return
        self.done = True
        if self.telemetry is not None:
            self.telemetry.stop()
        self._follow_moved_folder()
        try:
            summary = self.export_summary()
            self.summary_written = True
        except OSError as exc:
            summary = self.summary()
            if exc.errno is not None and not is_disk_full(exc.errno):
                self.disk.cause = exc.errno
            self.record(ev.Notice(
                t=time.time(), level="error",
                message=(f"cannot write the summary in {self.paths.dir}: {exc.strerror or exc}; "
                         f"{advice(exc.errno, str(self.paths.dir))}, "
                         f"then rebuild it with `neurondesk summary {self.paths.dir}`")))
        index = (self.options.run_root or default_run_root()) / INDEX_FILE
        try:  # a short wait: a lock held by another process must not keep the run "running" for viewers
            RunIndex(index, patience_s=FINISH_INDEX_PATIENCE_S).record(summary, self.paths.dir)
        except RunIndexBusy as exc:
            self.row_pending = (index, summary)  # written once the lock frees (pending_row.py)
            self.record(ev.Notice(t=time.time(), level="info", source="index", message=pending_words(exc)))
        except Exception as exc:  # noqa: BLE001 - the run folder is the truth; the index is a convenience
            self.record(ev.Notice(t=time.time(), level="warn", message=f"run index not updated: {exc}"))
        self.alerts.at_end(self.state, time.time(), summary)  # finished / failed / checks, journaled
        if self.row_pending is None:
            self.unregister()  # after the index row: the run is always in one of them
        self._close_journal()
        self._checkpoint(force=True)  # the whole run: a reader of the finished run reduces nothing
        if self.disk.folder is not None or not self.summary_written:
            s = self.summary()
            self.disk.save_summary(self.journal, to_json(s), to_markdown(s))
        if self.control is not None:
            self.control.close()
        if self.workload is not None and not self.workload.running():
            self.workload.cleanup()
        self.alerts.close()  # queued webhook posts: a bounded wait

    def _stop_workload(self) -> None:
        if self.workload is not None and self.workload.running():
            self.workload.stop()


    def _close_journal(self) -> None:
        if self.journal is None:
            return
        try:
            self.journal.close()
            return
        except JournalError as exc:
            self.journal_error = str(exc)
        if not self.journal.diverted and self._divert("at the end of the run"):
            try:
                self.journal.close()
            except JournalError as exc:
                self.journal_error = str(exc)

    @property
    def fallback(self) -> Path | None:
        return self.disk.folder


def serve(command: list[str], options: RunOptions, paths: RunPaths) -> int:
    """The recorder process's life: signals first (it is in a session of its own, away from the
    terminal; SIGTERM or SIGINT ends the recording but never the workload), then record."""
    recorder = Recorder(command, options, paths)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: recorder.request_stop(signal.Signals(s).name))
    try:
        recorder.start()
    except FolderTaken as exc:  # nothing journaled: the folder is the other recorder's
        sys.stderr.write(f"neurondesk recorder (pid {os.getpid()}): {exc}\n")
        return LOCK_TAKEN_EXIT
    except Exception:  # noqa: BLE001 - journaled by start(): notice + exit 127
        recorder.unregister()
        return 127
    try:
        code = recorder.run()  # the loop flushes after every batch, so at least every 0.1 s
    finally:
        if recorder.row_pending is None:
            recorder.unregister()  # ended by an error of its own: not left for a reader to clean up
    if recorder.row_pending is not None:  # the viewers let go first (the lock released), then the row
        if recorder.lock is not None:
            recorder.lock.release()
        if write_pending_row(*recorder.row_pending, recorder.paths.dir):
            recorder.unregister()
    return code
