"""Start the user's workload with the probe injected, and collect what it says.

Everything that arrives (probe messages over the private Unix socket, stdout and stderr lines,
the exit) is put on one queue as raw items, stamped with the time it arrived; the consumer
(the run session) decodes and parses them in a single thread.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BOOTSTRAP_DIR = Path(__file__).resolve().parent.parent / "probe" / "bootstrap"
MAX_LINE = 1 << 20  # longer output lines are cut (and marked) rather than held in memory


@dataclass(frozen=True)
class RawOutput:
    t: float
    stream: str
    text: str


@dataclass(frozen=True)
class RawProbe:
    t: float
    line: bytes


@dataclass(frozen=True)
class RawExit:
    t: float
    code: int | None


class WorkloadStartError(RuntimeError):
    pass


def probe_environment(base: dict[str, str], socket_path: str, tag: str | None = None) -> dict[str, str]:
    """The workload's environment: the user's, plus what the probe needs."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOTSTRAP_DIR), base.get("PYTHONPATH", "")) if p)
    env["NEURONDESK_SOCKET"] = socket_path
    env.setdefault("PYTHONUNBUFFERED", "1")  # progress lines arrive when printed, not at exit
    if "PT_XLA_DEBUG" not in base and "PT_XLA_DEBUG_LEVEL" not in base:
        # Compile analysis only (level 1: printed once per compile, nothing per step); each probe
        # sends it to a file of its own and reads it back right after the compile.
        env["PT_XLA_DEBUG_LEVEL"] = "1"
        env["NEURONDESK_PTXLA_DEBUG"] = "1"
    env.setdefault("TORCH_LOGS", "recompiles,graph_breaks")
    if tag:
        env.setdefault("NEURON_PROCESS_TAG", tag)
    return env


class WorkloadProcess:
    def __init__(self, command: list[str], out: queue.SimpleQueue, *, cwd: str | None = None,
                 env: dict[str, str] | None = None, tag: str | None = None) -> None:
        self.command = command
        self.out = out
        self.cwd = cwd
        self.base_env = dict(os.environ if env is None else env)
        self.tag = tag
        self.proc: subprocess.Popen | None = None
        self.sock_dir = tempfile.mkdtemp(prefix="nd-")  # short: Unix socket paths max ~107 bytes
        self.socket_path = os.path.join(self.sock_dir, "probe.sock")
        self.server: socket.socket | None = None
        self.threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.sent_signal: str | None = None

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        exe = shutil.which(self.command[0], path=self.base_env.get("PATH")) if self.command else None
        if exe is None:
            self.cleanup()
            raise WorkloadStartError(
                f"cannot start the workload: {self.command[0] if self.command else '(empty command)'!r} "
                "is not an executable on PATH; check the command after `--`")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.socket_path)
        self.server.listen(64)
        self._spawn(self._accept_loop, "nd-accept")
        env = probe_environment(self.base_env, self.socket_path, self.tag)
        try:
            self.proc = subprocess.Popen(
                self.command, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: we forward signals to all of it
            )
        except OSError as exc:
            self.cleanup()
            raise WorkloadStartError(f"cannot start the workload {self.command[0]!r}: {exc.strerror or exc}") from exc
        self._spawn(lambda: self._read_stream(self.proc.stdout, "stdout"), "nd-stdout")
        self._spawn(lambda: self._read_stream(self.proc.stderr, "stderr"), "nd-stderr")
        self._spawn(self._wait_exit, "nd-wait")

    def _spawn(self, target, name: str) -> None:
        th = threading.Thread(target=target, name=name, daemon=True)
        th.start()
        self.threads.append(th)

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self._spawn(lambda c=conn: self._read_probe(c), "nd-probe")

    def _read_probe(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            for line in f:
                self.out.put(RawProbe(time.time(), line[:MAX_LINE]))

    def _read_stream(self, pipe, stream: str) -> None:
        with pipe:
            while True:
                line = pipe.readline(MAX_LINE)
                if not line:
                    return
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                if len(line) >= MAX_LINE and not line.endswith(b"\n"):
                    text += " …[line cut at 1 MiB by neurondesk]"
                    self._skip_rest_of_line(pipe)
                self.out.put(RawOutput(time.time(), stream, text))

    @staticmethod
    def _skip_rest_of_line(pipe) -> None:
        while True:
            chunk = pipe.readline(MAX_LINE)
            if not chunk or chunk.endswith(b"\n"):
                return

    def _wait_exit(self) -> None:
        code = self.proc.wait()
        for th in self.threads:
            if th.name in ("nd-stdout", "nd-stderr"):
                th.join(timeout=5)  # let the last output lines arrive before the exit
        time.sleep(0.05)  # and the probe's last messages
        self.out.put(RawExit(time.time(), code))

    # ------------------------------------------------------------------ control
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if not self.running():
            return
        self.sent_signal = signal.Signals(sig).name
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace_s: float = 10.0, term_s: float = 5.0) -> None:
        """SIGINT (the workload may save and exit), then SIGTERM, then SIGKILL. Returns at once."""
        if not self.running():
            return

        def escalate() -> None:
            for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, term_s), (signal.SIGKILL, 0)):
                if not self.running():
                    return
                self.signal(sig)
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and self.running():
                    time.sleep(0.05)

        self._spawn(escalate, "nd-stop")

    def cleanup(self) -> None:
        self.stopping.set()
        if self.server is not None:
            self.server.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)
