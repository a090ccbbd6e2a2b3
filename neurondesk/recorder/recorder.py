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
from pathlib import Path

from neurondesk.collectors.devices.neuron_monitor import process_tag
from neurondesk.collectors.probe_lifelines import death_signal, read_step_counts
from neurondesk.collectors.telemetry import Telemetry
from neurondesk.collectors.workload import (
    RawExit,
    RawOutput,
    RawProbe,
    RawRelayStatus,
    WorkloadProcess,
    user_debug_notice,
)
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.job_identity import launch_env
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import Summary
from neurondesk.exporter.endpoint import MetricsExporter, linger_metrics
from neurondesk.recorder.control import ControlRequest, ControlServer, answer_workload_request
from neurondesk.recorder.flight_desk import flight_reading
from neurondesk.recorder.intake import Intake
from neurondesk.recorder.notify import AlertDesk
from neurondesk.recorder.options import RunOptions
from neurondesk.recorder.pending_row import record_row, write_pending_row
from neurondesk.recorder.price_desk import PriceDesk
from neurondesk.recorder.registration import moved_folder_notice, register_live_run
from neurondesk.recorder.run_journal import RunJournal
from neurondesk.recorder.sink_desk import SinkDesk
from neurondesk.recorder.starters import start_exporter, start_telemetry
from neurondesk.reports.summary_writer import to_json, to_markdown  # text only
from neurondesk.store.journal import JournalError
from neurondesk.store.live_registry import Registration
from neurondesk.store.liveness import (
    LOCK_TAKEN_EXIT,
    FolderTaken,
    RecorderInfo,
    RecorderLock,
    write_recorder_info,
)
from neurondesk.store.own_files import FileId, NotOurFile
from neurondesk.store.run_ids import run_id_for
from neurondesk.store.rundir import RunPaths, default_run_root, index_path
from neurondesk.store.summary_files import write_summary_files
from neurondesk.store.write_errors import advice, is_disk_full

PUMP_BATCH = 5000
# The main loop takes items in every PUMP_EVERY_S at most, a burst at a time: waking up and running
# cold costs more than an item (a probe batch and an output line arrive every 50 ms or so).
PUMP_EVERY_S = 0.1


class Stopped(Exception):
    """The recorder was told to go down (SIGTERM to itself); the workload runs on."""


def run_started(t: float, run_id: str, command: list[str], o: RunOptions) -> ev.RunStarted:
    """The journal's first event: what was run, where, and the options that judge it (the price
    follows it, as its own event: recorder/price_desk.py)."""
    return ev.RunStarted(
        t=t, run_id=run_id, command=command, cwd=o.cwd or os.getcwd(), host=socket.gethostname(),
        warmup_steps=o.warmup_steps, target_loss=o.target_loss, samples_per_step=o.samples_per_step,
        tokens_per_step=o.tokens_per_step, steps_requested=o.steps_requested, budget_usd=o.budget_usd,
        hang_after_s=o.hang_after_s, job_flag=o.job_id, node_flag=o.node,
        launch_env=launch_env(os.environ if o.env is None else o.env))


class Recorder:
    def __init__(self, command: list[str], options: RunOptions, paths: RunPaths, lock_id: FileId | None = None) -> None:
        self.command = list(command)
        self.lock_id = lock_id  # the lock file the launcher made or checked (None: made or checked here)
        self.options = options
        self.paths = paths
        self.run_id = run_id_for(paths.dir, options.run_root or default_run_root())  # unique, whatever the folder's name
        self.state = RunState()
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.prices = PriceDesk(options)  # resolved here, journalled: a replay shows the live price
        self.intake = Intake(self.state, self.record, lambda: self.paths)  # probe, output, relay, telemetry
        self.run_journal = RunJournal(paths, self.run_id, self.record, time.time)  # written before reduced
        self.workload: WorkloadProcess | None = None
        self.telemetry: Telemetry | None = None
        self.control: ControlServer | None = None
        self.lock: RecorderLock | None = None
        self.exit_code: int | None = None
        self.done = False
        self.summary_written = False
        self.stop_requested: str | None = None
        self.metrics: MetricsExporter | None = None
        self.registration: Registration | None = None  # this run's entry among the live runs
        self.row_pending: tuple[Path, Summary] | None = None  # (index, summary): the row a locked index refused
        self.alerts = AlertDesk(options, self.run_id, self.record, self.queue.put, self._stop_workload,
                                flight=lambda state: flight_reading(  # at a hang: the ranks' Flight Recorder dumps
                                    state, self.workload.sock_dir if self.workload else None,
                                    dict(os.environ if self.options.env is None else self.options.env)))
        self.sinks = SinkDesk(options, self.queue.put)  # --tensorboard, --mlflow, --wandb: started by the loop

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        self.lock = RecorderLock(self.paths.dir, self.lock_id, stamp=False)
        # before the journal: a run `run --detach` printed is listed (why not, when it could not be written)
        self.registration, unregistered = register_live_run(self.options.run_root or default_run_root(),
                                                            self.run_id, self.paths.dir, self.lock.fd)
        self.run_journal.open()
        self.lock.stamp()  # our pid there says to the launcher: the journal is this recorder's (made by it)
        o = self.options
        self.intake.probe_decoder.started_t = time.time()  # probe durations and times are bounded by the run's wall time
        self.record(run_started(self.intake.probe_decoder.started_t, self.run_id, self.command, o))
        self.record(self.prices.at_start(self.intake.probe_decoder.started_t))
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
            self.telemetry, problem = start_telemetry(o, self.queue.put, tag, self.paths.dir, self.workload.pid)
            if problem is not None:
                self.record(problem)

    def _follow_moved_folder(self) -> None:
        """Its folder was moved while the run was live: the summary and the index row go where it is now."""
        moved = moved_folder_notice(self.paths.dir, self.lock)
        if moved is not None:
            self.record(moved[1])
            self.paths = RunPaths(moved[0])
            self.run_journal.moved(self.paths)

    def unregister(self) -> None:
        if self.registration is not None:
            self.registration.remove()

    def _stop_workload(self) -> None:
        if self.workload is not None and self.workload.running():
            self.workload.stop()

    def _start_metrics(self) -> None:
        """--metrics-addr: served from this process, so the metrics outlive any viewer."""
        self.metrics, problem = start_exporter(self.options)
        if problem is not None:
            self.record(problem)  # a port that cannot be bound: the run goes on without metrics
        elif self.metrics is not None:
            self.metrics.publish(self.state, time.time(), force=True)

    # ------------------------------------------------------------------ events
    def record(self, e: ev.Event) -> None:
        """Journal first (an event that cannot be reduced is still on disk), then reduce."""
        self.run_journal.write(e)
        self.state.apply(e)

    def flush(self) -> None:
        """The journal to disk, then a checkpoint when one is due: where the run folder is now (a
        move while live is followed here, before a checkpoint or a segment rotation targets it)."""
        if self.lock is not None and not self.done:
            self._follow_moved_folder()
        self.run_journal.flush(self.state)

    def pump(self, timeout: float = 0.1) -> int:
        """Handle what has arrived (up to ``timeout`` for the first item), flush (viewers see it): the count."""
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
            self.intake.probe(item)
        elif isinstance(item, RawOutput):
            self.intake.output(item)
        elif isinstance(item, ControlRequest):
            self._control(item)
        elif isinstance(item, RawRelayStatus):
            if not self.done:  # after the end: the relay of a process left running
                self.intake.relay_status(item)
        elif isinstance(item, ev.Event):  # from the telemetry collectors
            if not self.done:
                self.intake.telemetry(item)
                for e in self.prices.after(item):  # neuron-monitor named the instance nothing else did
                    self.record(e)
        elif isinstance(item, RawExit):
            self._exited(item)

    def _exited(self, item: RawExit) -> None:
        self.intake.output_ended(item.t)
        if self.workload is not None:  # steps a probe counted but never sent: its process died with them
            for e in self.intake.probe_decoder.unsent(read_step_counts(self.workload.sock_dir), item.t):
                self.record(e)
        self.exit_code = item.code
        sent = self.workload.sent_signal if self.workload else None
        self.record(ev.RunFinished(t=item.t, exit_code=item.code, signal=sent or death_signal(item.code),
                                   stderr_tail=list(self.intake.stderr_tail),
                                   left_running=[ev.LeftProcess(p.pid, p.command) for p in item.left_running]))
        self.finish()

    def _control(self, req: ControlRequest) -> None:
        if req.op == "export":
            try:
                self.export_summary()
                req.answer(True, str(self.paths.summary_json))
            except OSError as exc:
                req.answer(False, f"cannot write the summary in {self.paths.dir}: {exc.strerror or exc}")
            return
        answer_workload_request(req, None if self.done else self.workload)

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        """Record until the workload exits (or this recorder is told to stop); its exit status as a shell's."""
        while not self.done:
            if self.stop_requested:
                self._stop_recording(self.stop_requested)
                break
            started = time.monotonic()
            if self.pump(timeout=PUMP_EVERY_S):  # then a pause: items are taken in bursts (PUMP_EVERY_S)
                time.sleep(max(0.0, PUMP_EVERY_S - (time.monotonic() - started)))
            if not self.done:
                self.alerts.poll(self.state, time.time())  # hang, budget, compile walls ... (recorder/notify.py)
                self.sinks.poll(self.state, time.time(), self.paths.dir)  # a frame a second, never waiting
            if self.metrics is not None:  # this thread owns the state: snapshot here, scrapes read it
                self.metrics.publish(self.state, time.time())
        if self.metrics is not None:  # closed by serve(), after the grace period (linger_metrics)
            self.metrics.publish(self.state, time.time(), force=True)
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

    def export_summary(self, now: float | None = None) -> Summary:
        """Write summary.json and summary.md now (the run may still be going)."""
        s = run_summary(self.state, now)
        write_summary_files(self.paths, to_json(s), to_markdown(s))
        return s

    def finish(self) -> None:
        """Idempotent: write the summary and the index row once, then close the journal. Every
        problem met on the way is journaled before the journal closes."""
        if self.done:
            return
        self.done = True
        self.run_journal.closed = True  # nothing more is said about checkpoints or rotations
        if self.telemetry is not None:
            self.telemetry.stop()
        self._follow_moved_folder()
        # built once: the summary files, the index row, the alerts, the sinks and the fallback copy all take this one
        summary = run_summary(self.state)
        try:
            write_summary_files(self.paths, to_json(summary), to_markdown(summary))
            self.summary_written = True
        except OSError as exc:
            if exc.errno is not None and not is_disk_full(exc.errno):
                self.run_journal.disk.cause = exc.errno
            self.record(ev.Notice(
                t=time.time(), level="error",
                message=(f"cannot write the summary in {self.paths.dir}: {exc.strerror or exc}; "
                         f"{advice(exc.errno, str(self.paths.dir))}, "
                         f"then rebuild it with `neurondesk summary {self.paths.dir}`")))
        index = index_path(self.options.run_root or default_run_root())
        self.row_pending, said = record_row(index, summary, self.paths.dir)  # pending: the index was locked
        if said is not None:
            self.record(said)
        self.alerts.at_end(self.state, time.time(), summary)  # finished / failed / checks, journaled
        self.sinks.close(self.state, summary, self.paths.dir, self.record,  # bounded; what each wrote, journaled
                         flush=lambda: self.run_journal.flush(self.state))
        if self.row_pending is None:
            self.unregister()  # after the index row: the run is always in one of them
        self.run_journal.close()
        self.run_journal.checkpoint(self.state, force=True)  # the whole run: a reader of the finished run reduces nothing
        if self.run_journal.fallback is not None or not self.summary_written:
            self.run_journal.disk.save_summary(self.run_journal.writer, to_json(summary), to_markdown(summary))
        if self.control is not None:
            self.control.close()
        if self.workload is not None and not self.workload.running():
            self.workload.cleanup()
        self.alerts.close()  # queued webhook posts: a bounded wait


def serve(command: list[str], options: RunOptions, paths: RunPaths, lock_id: FileId | None = None) -> int:
    """The recorder process's life: signals first (it is in a session of its own, away from the
    terminal; SIGTERM or SIGINT ends the recording but never the workload), then record."""
    recorder = Recorder(command, options, paths, lock_id)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: recorder.request_stop(signal.Signals(s).name))
    try:
        recorder.start()
    except FolderTaken as exc:  # nothing journaled: the folder is the other recorder's
        sys.stderr.write(f"neurondesk recorder (pid {os.getpid()}): {exc}\n")
        return LOCK_TAKEN_EXIT
    except (NotOurFile, JournalError) as exc:  # a planted lock or journal: refused before the workload runs
        recorder.unregister()
        sys.stderr.write(f"neurondesk recorder (pid {os.getpid()}): {exc}\n")  # the launcher's words
        return 127
    except Exception:  # noqa: BLE001 - journaled by start(): notice + exit 127
        recorder.unregister()
        return 127
    try:
        code = recorder.run()  # the loop flushes after every batch, so at least every 0.1 s
    finally:
        if recorder.row_pending is None:
            recorder.unregister()  # ended by an error of its own: not left for a reader to clean up
    if recorder.row_pending is not None or recorder.metrics is not None:  # the viewers let go first
        if recorder.lock is not None:
            recorder.lock.release()
    if recorder.row_pending is not None:  # the lock released, then the row
        if write_pending_row(*recorder.row_pending, recorder.paths.dir):
            recorder.unregister()
    if recorder.metrics is not None:
        linger_metrics(recorder.metrics, options.metrics_grace_s, lambda: recorder.stop_requested is not None)
    return code
