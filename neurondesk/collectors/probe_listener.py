"""The recorder's end of the probes' private Unix socket: accepts each probe's connection and reads
its lines on a thread of its own (``read`` is given each connection).

At the workload's exit, ``drain`` waits (bounded) until every connection made before the exit has
been accepted and read. A short-lived process (a Python 2.7 helper whose bootstrap sends one
notice and exits, a script that ends in milliseconds) connects, writes and exits before this side
has accepted: its connection still waits in the listen backlog, so it is in no reader thread yet.
Waiting only for the reader threads already started (as before) let the run's end be recorded
first, and the message was lost. Here the exit wakes the accept loop, which takes every
connection still queued (a connection the process made is queued before its exit) and only then
says the backlog is empty.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Callable


class ProbeListener:
    def __init__(self, path: str, read: Callable[[socket.socket], None],
                 spawn: Callable[[Callable[[], None], str], threading.Thread]) -> None:
        self.path = path
        self._read = read
        self._spawn = spawn
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(64)
        self._wake_r, self._wake_w = os.pipe()  # written at the exit (drain) and at close
        self.stopping = threading.Event()
        self.backlog_taken = threading.Event()  # after a drain's wake-up: nothing left in the backlog
        self.readers: list[threading.Thread] = []
        self._loop = spawn(self._accept_loop, "nd-accept")

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                ready, _, _ = select.select([self.server, self._wake_r], [], [])
            except (OSError, ValueError):  # closed
                return
            if self.server in ready:  # first what waits in the backlog, then the wake-up
                try:
                    conn, _ = self.server.accept()
                except OSError:
                    return
                self.readers.append(self._spawn(lambda c=conn: self._read(c), "nd-probe"))
            elif ready:
                try:
                    os.read(self._wake_r, 64)
                except OSError:
                    return
                self.backlog_taken.set()  # the wake-up came after the exit, and the backlog is empty

    def drain(self, deadline: float) -> None:
        """Once the workload has exited: accept what waits in the backlog, then wait for every
        reader to end, all by ``deadline`` (time.monotonic()): a process left running may hold its
        connection open."""
        self.backlog_taken.clear()
        self._wake()
        self.backlog_taken.wait(max(0.0, deadline - time.monotonic()))
        for th in list(self.readers):
            th.join(timeout=max(0.0, deadline - time.monotonic()))

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def close(self) -> None:
        self.stopping.set()
        self._wake()
        self.server.close()
        self._loop.join(timeout=1.0)
        if not self._loop.is_alive():  # else it may still select on them: left to the process's exit
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
