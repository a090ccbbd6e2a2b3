"""The one interface every sink keeps, and the thread that runs one without ever blocking its feeder.

A ``Sink`` is opened with the run's ``RunInfo``, written ``Frame``s in batches, and closed with the
``RunEnd``. It may raise anything: ``SinkRunner`` catches it. The runner owns a thread and a bounded
queue; ``offer()`` never waits (a full queue drops the frame and counts it), so a slow, hanging or
dead tool costs the feeder (the recorder's loop) one ``put_nowait``. What the tool did not get is
counted; a failure is said once in one line (``say``), a recovery once more, and ``close()`` waits
a bounded time and returns the line that says what was written and what was not. A tool's own error text
enters neurondesk through ``why`` alone, redacted there (sinks/redact.py: the sink's ``secrets``, user info,
query strings): nothing downstream (notices, journal, summary, index, streams) can hold a credential.
What a tool is sent goes through ``scrub_info`` / ``scrub_end`` (``sink_secrets``: the environment's secrets
the sink knows, and the command line's secret flag values): no param, tag, config or artifact holds one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

from neurondesk.sinks.frames import Frame, RunEnd, RunInfo
from neurondesk.sinks.redact import redact, replace_secrets

QUEUE_MAX = 600  # frames (10 minutes at one a second) while the tool is slow
BATCH_MAX = 200  # frames written in one call: MLflow's log_batch takes 1,000 metrics
REOPEN_EVERY_S = 10.0  # a tool that could not be opened is tried again this often


class SinkError(Exception):
    """A sink that cannot be used as given (one line: what and what to do)."""


class Sink(Protocol):
    name: str  # "tensorboard" | "mlflow" | "wandb"
    where: str  # the folder, URI (without secrets) or project, for every line said about it
    secrets: tuple[str, ...]  # values its tool's text must never show (sinks/redact.py: secret_values)

    def open(self, info: RunInfo) -> None: ...

    def write(self, frames: list[Frame]) -> None: ...

    def close(self, end: RunEnd) -> str:
        """Writes the end (final figures, compiles, artifacts); returns where to look, in words."""
        ...


def why(exc: BaseException, secrets: tuple[str, ...] = ()) -> str:
    """A tool's exception in one line, without credentials (redacted before it is cut: no half secret);
    a SinkError is neurondesk's own line (what and what to do), whole."""
    if isinstance(exc, SinkError):
        return redact(str(exc), secrets)
    text = redact(str(exc), secrets).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


def sink_secrets(sink: Sink, info: RunInfo) -> tuple[str, ...]:
    """Every value the sink must never send nor say: its own (the environment's, its URI's) and the command
    line's (``--hf-token X``), longest first."""
    return tuple(sorted({*sink.secrets, *info.hidden}, key=len, reverse=True))


def scrub_info(info: RunInfo, secrets: tuple[str, ...]) -> RunInfo:
    """The params and tags as a tool may get them: no secret in any value."""
    return RunInfo(run_id=info.run_id, params={k: redact(v, secrets) for k, v in info.params.items()},
                   tags={k: redact(v, secrets) for k, v in info.tags.items()}, hidden=info.hidden)


def scrub_end(end: RunEnd, secrets: tuple[str, ...]) -> RunEnd:
    """The end as a tool may get it: its info scrubbed, each artifact (summary.json, summary.md,
    report.html: the command is in them) without a secret value (the rest of their text as it is)."""
    return RunEnd(frame=end.frame, info=scrub_info(end.info, secrets), exit_code=end.exit_code,
                  compiles=end.compiles, artifacts={k: replace_secrets(v, secrets) for k, v in end.artifacts.items()})


class SinkRunner:
    def __init__(self, sink: Sink, say: Callable[[str], None], queue_max: int = QUEUE_MAX,
                 batch_max: int = BATCH_MAX) -> None:
        self.sink, self._say, self._batch_max = sink, say, batch_max
        self._queue: queue.Queue = queue.Queue(maxsize=queue_max)
        self.offered = 0  # frames taken for this sink
        self.sent = 0
        self.dropped = 0  # of them, found the queue full
        self.failed = 0  # of them, the tool refused or never answered
        self._info: RunInfo | None = None
        self._opened = False
        self._open_at = 0.0
        self._failing: str | None = None
        self.look = ""  # where to look, from the sink's close()
        self._secrets: tuple[str, ...] = sink.secrets
        self._thread = threading.Thread(target=self._loop, name=f"neurondesk-sink-{sink.name}", daemon=True)

    @property
    def label(self) -> str:
        return f"{self.sink.name} {self.sink.where}"

    def start(self, info: RunInfo) -> None:
        self._secrets = sink_secrets(self.sink, info)
        self._info = scrub_info(info, self._secrets)
        self._thread.start()

    def offer(self, frame: Frame) -> None:
        """Never waits."""
        self.offered += 1
        try:
            self._queue.put_nowait(frame)
        except queue.Full:
            self.dropped += 1

    def send_end(self, end: RunEnd, wait_s: float) -> None:
        """The last frame and the end, queued behind what is there (waiting ``wait_s`` at most for room)."""
        self.offered += 1  # the end's frame
        try:
            self._queue.put(end, timeout=wait_s)
        except queue.Full:
            pass

    def result(self, deadline: float) -> tuple[str, str]:
        """(level, line) once the end is written or ``deadline`` (monotonic) passed: what was not sent."""
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()))
        missing = self.offered - self.sent
        if self._thread.is_alive():
            return "warn", (f"{self.label}: still not done at the end of the run, left; {missing} of {self.offered} "
                            f"frames not sent{self._dropped_words()}")
        if missing or self._failing:
            return "warn", (f"{self.label}: {missing} of {self.offered} frames not sent"
                            f"{self._dropped_words()}{f' ({self._failing})' if self._failing else ''}")
        return "info", f"{self.label}: {self.sent} frames written{f'; {self.look}' if self.look else ''}"

    def close(self, end: RunEnd, wait_s: float) -> tuple[str, str]:
        deadline = time.monotonic() + wait_s
        self.send_end(end, wait_s)
        return self.result(deadline)

    def _dropped_words(self) -> str:
        return f", {self.dropped} of them dropped while it was slow" if self.dropped else ""

    # ------------------------------------------------------------------ the sink's thread
    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            batch: list[Frame] = []
            while isinstance(item, Frame):
                batch.append(item)
                if len(batch) >= self._batch_max:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    item = None
            if batch:
                self._write(batch)
            if isinstance(item, RunEnd):
                self._end(item)
                return

    def _ready(self) -> bool:
        if self._opened:
            return True
        now = time.monotonic()
        if now < self._open_at:
            return False
        self._open_at = now + REOPEN_EVERY_S
        try:
            self.sink.open(self._info)
        except Exception as exc:  # noqa: BLE001 - a tool's failure never leaves its thread
            self._failed(f"cannot open it: {why(exc, self._secrets)}")
            return False
        self._opened = True
        return True

    def _write(self, batch: list[Frame]) -> None:
        if not self._ready():
            self.failed += len(batch)
            return
        try:
            self.sink.write(batch)
        except Exception as exc:  # noqa: BLE001
            self.failed += len(batch)
            self._failed(why(exc, self._secrets))
            return
        self.sent += len(batch)
        if self._failing:
            self._failing = None
            self._say(f"{self.label}: written to again; {self.offered - self.sent} frames not sent so far")

    def _end(self, end: RunEnd) -> None:
        self._open_at = 0.0  # the end is worth one more try
        self._write([end.frame])
        if not self._opened:
            return
        try:
            self.look = self.sink.close(scrub_end(end, self._secrets))
        except Exception as exc:  # noqa: BLE001
            self._failed(f"its end not written: {why(exc, self._secrets)}")

    def _failed(self, words: str) -> None:
        if self._failing is None:
            self._say(f"{self.label}: {words}; the run goes on, what it does not get is counted")
        self._failing = words
