"""Run a line-printing command in a thread and restart it with exponential backoff when it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import IO


def describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


class RestartingProcess:
    """Start ``command``, pass each stdout line (bytes, newline kept) to ``on_line``; when it
    exits, call ``on_notice(level, message)`` and start it again after 1, 2, 4 ... ``backoff_max``
    seconds. A run that lasted ``stable_after_s`` resets the backoff. ``stop()`` ends it all."""

    def __init__(
        self,
        command: Sequence[str],
        on_line: Callable[[bytes], None],
        on_notice: Callable[[str, str], None],
        *,
        name: str = "",
        env: Mapping[str, str] | None = None,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        stable_after_s: float = 60.0,
        restart_on_clean_exit: bool = True,
        max_restarts: int | None = None,
    ) -> None:
        self.command = list(command)
        self.name = name or (self.command[0] if self.command else "process")
        self._on_line = on_line
        self._on_notice = on_notice
        self._env = dict(env) if env is not None else None
        self._backoff = (backoff_initial, backoff_max, stable_after_s)
        self._restart_on_clean_exit = restart_on_clean_exit
        self._max_restarts = max_restarts
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self.starts = 0  # processes started (the first one included)
        self.restarts = 0
        self.callback_errors = 0
        self.last_callback_error: str | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        self._thread = threading.Thread(target=self._loop, name=f"{self.name}-reader", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the supervising thread to end (it ends on stop, give-up or clean exit)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.is_running()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is not None:
            _terminate(proc, timeout)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # ------------------------------------------------------------------ the thread

    def _notice(self, level: str, message: str) -> None:
        try:
            self._on_notice(level, message)
        except Exception as e:  # noqa: BLE001 - the consumer's bug must not kill the reader
            self._callback_failed(e)

    def _callback_failed(self, e: Exception) -> None:
        self.callback_errors += 1
        self.last_callback_error = f"{type(e).__name__}: {e}"

    def _run_once(self) -> str | None:
        """Run the command to its end; return what happened, or None when it ended as it should."""
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,  # the console's Ctrl-C is not its Ctrl-C
            )
        except OSError as e:
            return f"could not be started ({e.strerror or e})"
        self.starts += 1
        with self._lock:
            self._proc = proc
        if self._stop.is_set():  # stop() ran between the check and Popen
            _terminate(proc, 2.0)
        err_tail: deque[str] = deque(maxlen=3)
        drain = threading.Thread(target=_drain, args=(proc.stderr, err_tail), daemon=True)
        drain.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                self._on_line(line)
            except Exception as e:  # noqa: BLE001 - counted, the stream goes on
                self._callback_failed(e)
        rc = proc.wait()
        drain.join(1.0)
        with self._lock:
            self._proc = None
        if self._stop.is_set():
            return None
        if rc == 0 and not self._restart_on_clean_exit:
            self._notice("info", f"{self.name} stream ended")
            return None
        tail = f": {err_tail[-1]}" if err_tail else ""
        return f"{describe_exit(rc)}{tail}"

    def _loop(self) -> None:
        initial, maximum, stable_after = self._backoff
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            outcome = self._run_once()
            if outcome is None:
                return
            failures = 1 if time.monotonic() - started >= stable_after else failures + 1
            if self._max_restarts is not None and self.restarts >= self._max_restarts:
                self._notice("error", f"{self.name} {outcome}; gave up after {self.restarts} restarts")
                return
            delay = min(initial * 2 ** (failures - 1), maximum)
            self._notice("warn", f"{self.name} {outcome}; restarting in {delay:g} s")
            if self._stop.wait(delay):
                return
            self.restarts += 1


def _drain(stream: IO[bytes] | None, tail: deque[str]) -> None:
    if stream is None:
        return
    for raw in stream:
        text = raw.decode("utf-8", errors="replace").strip()
        if text:
            tail.append(text[:300])


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL, to the whole session: a wrapper script's children hold the pipe too."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)  # its own session (start_new_session), so pgid == pid
        except ProcessLookupError:
            pass
        except OSError:
            if proc.poll() is None:
                proc.send_signal(sig)
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            continue
