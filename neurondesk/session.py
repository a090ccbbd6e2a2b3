"""A run session: launch the workload, journal every event, reduce it, write the summary.

Both views use it: the headless printer pumps it from its loop, the console from a timer. All
decoding, journaling and reducing happens in the thread that calls `pump()`.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from neurondesk.collectors.devices.neuron_monitor import process_tag
from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.probe_messages import decode_probe_line
from neurondesk.collectors.telemetry import Telemetry
from neurondesk.collectors.workload import RawExit, RawOutput, RawProbe, WorkloadProcess
from neurondesk.core import events as ev
from neurondesk.core.state import RunState
from neurondesk.core.summary import build_summary
from neurondesk.store.index import RunIndex
from neurondesk.store.journal import JournalError, JournalWriter
from neurondesk.store.rundir import INDEX_FILE, RunPaths, create_run_dir, default_run_root, make_run_id
from neurondesk.views.summary_writer import to_json, to_markdown

STDERR_TAIL = 30


@dataclass
class RunOptions:
    instance_type: str | None = None
    price_per_hour: float | None = None
    price_source: str | None = None
    warmup_steps: int = 5
    target_loss: float | None = None
    samples_per_step: int | None = None
    tokens_per_step: int | None = None
    steps_requested: int | None = None
    run_dir: Path | None = None  # exact folder for this run
    run_root: Path | None = None  # folder holding runs (default: user data dir)
    cwd: str | None = None
    env: dict[str, str] | None = None
    telemetry: bool = True
    neuron_monitor_replay: str | None = None  # a recorded neuron-monitor stream instead of the tool


class RunSession:
    def __init__(self, command: list[str], options: RunOptions) -> None:
        self.command = list(command)
        self.options = options
        self.state = RunState()
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.parser = OutputParser()
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.paths: RunPaths | None = None
        self.journal: JournalWriter | None = None
        self.workload: WorkloadProcess | None = None
        self.log_file = None
        self.exit_code: int | None = None
        self.done = False
        self.summary_written = False
        self.run_id: str | None = None
        self.journal_error: str | None = None
        self.telemetry: Telemetry | None = None

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        self.paths = self._make_run_dir()
        self.run_id = self.paths.dir.name
        self.journal = JournalWriter(self.paths.events)
        self.log_file = open(self.paths.workload_log, "a", encoding="utf-8", errors="replace")  # noqa: SIM115
        o = self.options
        self.record(ev.RunStarted(
            t=time.time(), run_id=self.run_id, command=self.command, cwd=o.cwd or os.getcwd(),
            host=socket.gethostname(), instance_type=o.instance_type, price_per_hour=o.price_per_hour,
            price_source=o.price_source, warmup_steps=o.warmup_steps, target_loss=o.target_loss,
            samples_per_step=o.samples_per_step, tokens_per_step=o.tokens_per_step,
            steps_requested=o.steps_requested))
        tag = process_tag(self.run_id)
        self.workload = WorkloadProcess(self.command, self.queue, cwd=o.cwd, env=o.env, tag=tag)
        try:
            self.workload.start()
            if o.telemetry:
                self.telemetry = Telemetry(self.queue.put, tag=tag, env=o.env,
                                           neuron_monitor_replay=o.neuron_monitor_replay)
                self.telemetry.start(self.workload.pid)
        except Exception as exc:
            self.record(ev.Notice(t=time.time(), level="error", message=str(exc)))
            self.record(ev.RunFinished(t=time.time(), exit_code=127))
            self.finish()
            raise

    def _make_run_dir(self) -> RunPaths:
        o = self.options
        if o.run_dir is not None:
            o.run_dir.mkdir(parents=True, exist_ok=True)
            if (o.run_dir / "events.jsonl").exists():
                raise FileExistsError(f"{o.run_dir} already holds a run (events.jsonl); choose another --run-dir")
            return RunPaths(o.run_dir)
        root = o.run_root or default_run_root()
        return create_run_dir(root, make_run_id(datetime.now()))

    # ------------------------------------------------------------------ events
    def record(self, e: ev.Event) -> None:
        self.state.apply(e)
        try:
            self.journal.write(e)  # keeps the event buffered even when the flush it triggers fails
        except JournalError as exc:
            if self.journal_error is None:
                self.state.notices.append(ev.Notice(t=time.time(), level="error", message=str(exc)))
            self.journal_error = str(exc)

    def pump(self, max_items: int = 5000, timeout: float = 0.0) -> int:
        """Handle what has arrived; wait up to `timeout` for the first item. Returns items handled."""
        n = 0
        while n < max_items:
            try:
                item = self.queue.get(timeout=timeout) if (n == 0 and timeout > 0) else self.queue.get_nowait()
            except queue.Empty:
                break
            n += 1
            self.handle(item)
        if n:
            self.after_batch()
        return n

    def after_batch(self) -> None:
        """Flush the journal after a batch of items (JournalWriter also flushes at least every second)."""
        if self.done:
            return
        try:
            self.journal.flush()
            self.journal_error = None
        except JournalError as exc:  # disk full: events stay buffered in memory; say so once
            if self.journal_error is None:
                self.state.notices.append(ev.Notice(t=time.time(), level="error", message=str(exc)))
            self.journal_error = str(exc)

    def handle(self, item) -> None:
        if isinstance(item, RawProbe):
            self.record(decode_probe_line(item.line, item.t))
        elif isinstance(item, RawOutput):
            if self.log_file is not None:
                try:
                    self.log_file.write(f"{item.stream}: {item.text}\n")
                except OSError as exc:  # the journal has the line too; stop the copy, say why once
                    self.log_file = None
                    self.state.notices.append(ev.Notice(t=item.t, level="warn",
                                                        message=f"workload.log not written further: {exc}"))
            if item.stream == "stderr":
                self.stderr_tail.append(item.text)
            for e in self.parser.feed(item.stream, item.text, item.t):
                self.record(e)
        elif isinstance(item, ev.Event):  # from the telemetry collectors
            if not self.done:
                self.record(item)
        elif isinstance(item, RawExit):
            for e in self.parser.flush(item.t):
                self.record(e)
            self.exit_code = item.code
            self.record(ev.RunFinished(t=item.t, exit_code=item.code,
                                       signal=self.workload.sent_signal if self.workload else None,
                                       stderr_tail=list(self.stderr_tail)))
            self.finish()

    # ------------------------------------------------------------------ control
    def stop(self) -> None:
        if self.workload is not None:
            self.workload.stop()

    def forward_signal(self, sig: int = signal.SIGINT) -> None:
        if self.workload is not None:
            self.workload.signal(sig)

    def abort(self, reason: str) -> None:
        """neurondesk itself is going down: end the workload (it runs in its own process group and
        would be orphaned) and write what was recorded."""
        if self.done:
            return
        if self.workload is not None:
            self.workload.signal(signal.SIGTERM)
        self.record(ev.Notice(t=time.time(), level="error", message=f"neurondesk stopped: {reason}"))
        self.record(ev.RunFinished(t=time.time(), exit_code=None, signal="SIGTERM",
                                   stderr_tail=list(self.stderr_tail)))
        self.finish()

    def summary(self, now: float | None = None) -> dict:
        return build_summary(self.state, now)

    def export_summary(self, now: float | None = None) -> dict:
        """Write summary.json and summary.md now (the run may still be going)."""
        s = self.summary(now)
        _write_atomic(self.paths.summary_json, to_json(s))
        _write_atomic(self.paths.summary_md, to_markdown(s))
        return s

    def finish(self) -> None:
        """Idempotent: flush the journal, write the summary and the index row once."""
        if self.done:
            return
        self.done = True
        if self.telemetry is not None:
            self.telemetry.stop()
        if self.journal is not None:
            try:
                self.journal.close()
            except JournalError as exc:
                self.journal_error = str(exc)
        if self.log_file is not None:
            try:
                self.log_file.close()
            except OSError:
                pass  # workload.log is a convenience copy; every line is in the journal
            self.log_file = None
        try:
            summary = self.export_summary()
            self.summary_written = True
        except OSError as exc:
            summary = self.summary()
            self.state.notices.append(ev.Notice(
                t=time.time(), level="error",
                message=(f"cannot write the summary in {self.paths.dir}: {exc.strerror or exc}; free disk space, "
                         f"then rebuild it with `neurondesk summary {self.paths.dir}`")))
        if self.journal_error:
            self.state.notices.append(ev.Notice(t=time.time(), level="error", message=self.journal_error))
        try:
            root = self.options.run_root or default_run_root()
            RunIndex(root / INDEX_FILE).record(summary, self.paths.dir)
        except Exception as exc:  # the run folder is the truth; the index is a convenience
            self.state.notices.append(ev.Notice(t=time.time(), level="warn",
                                                message=f"run index not updated: {exc}"))
        if self.workload is not None:
            self.workload.cleanup()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
