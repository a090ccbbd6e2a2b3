"""Sending: messages to the recorder over its private Unix socket, in batches, never blocking.

Messages are buffered and handed to the kernel in batches: when a message that a viewer waits for
arrives (URGENT), when the buffer is large, or once FLUSH_S has passed since the last send
(checked at each message, so at every step boundary, and by a small flusher thread while the
program is quiet), and at exit. The socket never blocks the training: while the recorder does not
read, at most MAX_PENDING messages (or MAX_PENDING_BYTES) wait in the buffer, plus the one batch
the kernel took only part of; newer ones are dropped, counted, and reported in a `probe_dropped`
message as soon as the recorder reads again (and at exit). If the recorder is gone (EPIPE,
ECONNRESET ...), the probe stops for good: no signal, no output, no retry.

Ordinary steps wait in columns (batch.py) and go as one `steps` message at the next send; any
other message closes the batch first, so the recorder sees everything in the order it happened.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time

from . import lifelines
from .batch import StepColumns

MAX_PENDING = 20000
MAX_PENDING_BYTES = 16 << 20
FLUSH_BYTES = 64 << 10
FLUSH_S = 0.05
CONNECT_WAIT_S = 2.0  # at the first message, for room in the recorder's accept backlog
EXIT_WAIT_S = 2.0  # at exit, wait at most this long for a slow recorder to take the last messages
URGENT = frozenset({"process_attached", "device_seen", "compile", "compile_started", "notice"})
# A recorder that died must not kill the workload with SIGPIPE, even one that set SIGPIPE to SIG_DFL.
_MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)


def dumps(msg: dict) -> bytes:
    return (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()


class Transport:
    """The socket, the buffer and the drop counts; its own lock guards them (the flusher thread
    and the compile watcher send too). ``probe.disabled`` is the one switch it shares."""

    def __init__(self, probe, socket_path: str, hello) -> None:
        self.probe = probe
        self.socket_path = socket_path
        self.hello = hello  # () -> the process_attached message, sent first on the connection
        self.sock: socket.socket | None = None
        self.buf: list[bytes] = []  # whole messages not yet handed to the kernel
        self.buf_bytes = 0
        self.partial: bytes | memoryview = b""  # the rest of a batch the kernel took only part of
        self.last_flush = 0.0  # perf_counter of the last attempt to send
        self.flusher_started = False
        self.steps_ended = 0  # step messages made, sent or dropped: the `steps` of probe_dropped
        self.dropped = 0  # messages dropped because the recorder did not read
        self.dropped_steps = 0  # how many of those were step messages
        self.dropped_reported = 0  # `dropped` as of the last probe_dropped message queued
        self.hello_sent = False
        self.cols = StepColumns()  # steps not yet in the buffer, coalesced
        self.batched = 0  # steps in the columns and in the batches of the buffer: each counts as a message
        self.count = lifelines.StepCount(probe)  # steps_ended in shared memory, from the first step on
        self.lock = threading.Lock()  # guards the socket, the buffer and the columns only

    def forget_in_forked_child(self) -> None:
        self.sock = None  # the parent's connection; never write to it from here
        self.buf, self.buf_bytes, self.partial, self.batched = [], 0, b"", 0
        self.cols = StepColumns()
        self.dropped = self.dropped_reported  # nothing to report from here either
        self.lock = threading.Lock()  # the parent's may have been held by its flusher at the fork

    def send(self, msg: dict) -> None:
        """Queue one message (a dict shaped like an event). Never blocks, never raises OSError."""
        if self.probe.disabled:
            return
        msg.setdefault("t", time.time())
        msg.setdefault("pid", self.probe.pid)
        self.queue(dumps(msg), False, msg.get("kind") in URGENT)

    def say_hello(self) -> None:
        """Connect now (the hello goes first), without a message of its own."""
        with self.lock:
            if self.sock is None and not self.probe.disabled and self._connect(time.perf_counter()):
                self._flush(time.perf_counter())

    def queue(self, data: bytes, is_step: bool, urgent: bool, now: float | None = None) -> None:
        if now is None:
            now = time.perf_counter()
        with self.lock:
            if self.sock is None:
                if self.probe.disabled or not self._connect(now):
                    return
            full = self._full()
            if full and now - self.last_flush >= FLUSH_S:
                self._flush(now)  # the recorder may be reading again: that makes room
                full = self._full()
            if is_step:
                self.steps_ended += 1  # after that flush: a drop report it queues is before this step
                self.count.store(self.steps_ended)
            if full:
                self.dropped += 1
                if is_step:
                    self.dropped_steps += 1
                return
            if self.cols.n:
                self._close_batch()  # the steps before this message go before it
            self.buf.append(data)
            self.buf_bytes += len(data)
            if urgent or self.buf_bytes >= FLUSH_BYTES or now - self.last_flush >= FLUSH_S:
                self._flush(now)

    def queue_step(self, step: int, t: float, duration: float, wait: float, samples: int, tokens: int,
                   execs: int | None, presync: float | None, shapes, now: float, phases=None) -> None:
        """One ordinary step into the columns (counted and dropped as a step message would be)."""
        with self.lock:
            if self.sock is None:
                if self.probe.disabled or not self._connect(now):
                    return
            full = self._full()
            if full and now - self.last_flush >= FLUSH_S:
                self._flush(now)
                full = self._full()
            self.steps_ended += 1
            self.count.store(self.steps_ended)
            if full:
                self.dropped += 1
                self.dropped_steps += 1
                return
            cols = self.cols
            shape_of = (samples > 0, tokens > 0, execs is not None, presync is not None, phases is not None)
            if not (cols.n and cols.fits(step, shape_of, shapes)):
                if cols.n:
                    self._close_batch()
                cols.start(step, shape_of, shapes)
            cols.add(t, duration, wait, samples, tokens, execs, presync, phases)
            self.batched += 1
            if now - self.last_flush >= FLUSH_S:
                self._flush(now)

    def _full(self) -> bool:
        """The backlog's bound, in messages (a coalesced step counts as one, as it did alone) and bytes."""
        return len(self.buf) + self.batched >= MAX_PENDING or self.buf_bytes >= MAX_PENDING_BYTES

    def _close_batch(self) -> None:
        data = self.cols.render(self.probe.pid, self.dropped)
        self.buf.append(data)
        self.buf_bytes += len(data)

    def _connect(self, now: float) -> bool:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.setblocking(False)  # never let a slow recorder block training
                while True:
                    try:
                        s.connect(self.socket_path)
                        break
                    except (BlockingIOError, InterruptedError):
                        # Its accept backlog is full (many ranks connecting at once): wait a little
                        # for room, but not for a recorder that is stopped.
                        if time.perf_counter() - now > CONNECT_WAIT_S:
                            raise
                        time.sleep(0.005)
            except BaseException:
                s.close()
                raise
        except OSError:
            self.probe.disabled = True  # nobody is listening: stay out of the way
            return False
        self.sock = s
        self.last_flush = now - FLUSH_S  # the hello (and the first message) go at once
        if not self.hello_sent:
            self.hello_sent = True
            hello = dumps(self.hello())
            self.buf.append(hello)
            self.buf_bytes += len(hello)
        if not self.flusher_started:
            self.flusher_started = True
            threading.Thread(target=self._flusher, name="neurondesk-probe-flush", daemon=True).start()
        return True

    def _flush(self, now: float) -> None:
        """Hand the buffer to the kernel, as far as it takes it without blocking. Holds self.lock."""
        self.last_flush = now
        sock = self.sock
        if sock is None:
            return
        if self.cols.n:
            self._close_batch()
        try:
            while True:
                if not self.partial:
                    if self.dropped != self.dropped_reported:
                        self._queue_drop_report()  # the recorder reads again: tell it what it missed
                    if not self.buf:
                        return
                    self.partial = self.buf[0] if len(self.buf) == 1 else b"".join(self.buf)
                    self.buf, self.buf_bytes, self.batched = [], 0, 0
                n = sock.send(self.partial, _MSG_NOSIGNAL)
                if n < len(self.partial):
                    self.partial = memoryview(self.partial)[n:]
                    return
                self.partial = b""
        except (BlockingIOError, InterruptedError):
            return  # the recorder is not reading right now: keep it for the next try
        except OSError:
            self._lost_peer()  # EPIPE, ECONNRESET, ENOTCONN ...: the recorder is gone

    def _lost_peer(self) -> None:
        """The recorder is gone: stop sending for good. No reconnect, no notice, no output; the
        hooks see `disabled` and return at once, so the rest of the run costs nothing."""
        self.probe.disabled = True
        self.buf, self.buf_bytes, self.partial, self.batched = [], 0, b"", 0
        self.cols = StepColumns()
        sock, self.sock = self.sock, None
        try:
            if sock is not None:
                sock.close()
        except OSError:
            pass

    def _queue_drop_report(self) -> None:
        self.dropped_reported = self.dropped
        data = dumps({"kind": "probe_dropped", "t": time.time(), "pid": self.probe.pid, "dropped": self.dropped,
                      "dropped_steps": self.dropped_steps, "steps": self.steps_ended})
        self.buf.append(data)
        self.buf_bytes += len(data)

    def _flusher(self) -> None:
        # Sends what waits in the buffer while the program is quiet (a long step, an eval, a
        # checkpoint after a burst of fast steps), so viewers hear of it within ~0.1 s.
        try:
            while not self.probe.disabled:
                time.sleep(FLUSH_S)
                if not (self.buf or self.partial or self.cols.n or self.dropped != self.dropped_reported):
                    continue
                now = time.perf_counter()
                if now - self.last_flush >= FLUSH_S:
                    with self.lock:
                        self._flush(now)
        except Exception:  # noqa: BLE001 - fail open: without it, steps and exit still send
            return

    def flush_at_exit(self) -> None:
        """Send what is left (with a probe_dropped report if anything was dropped), waiting a
        little for a slow recorder, never long, never raising."""
        if self.sock is None:
            return
        try:
            with self.lock:
                deadline = time.perf_counter() + EXIT_WAIT_S
                if self.dropped != self.dropped_reported:
                    self._queue_drop_report()  # over the cap if need be: it is the final count
                while True:
                    now = time.perf_counter()
                    self._flush(now)
                    if self.sock is None or not (self.partial or self.buf or self.cols.n):
                        return
                    left = deadline - now
                    if left <= 0 or not select.select([], [self.sock], [], left)[1]:
                        return  # the recorder has stopped reading: leave the rest
        except Exception:  # noqa: BLE001 - never raise at the user's exit
            return
