"""Start the user's workload with the probe injected, and collect what it says.

Everything that arrives (probe messages over the private Unix socket, stdout and stderr lines,
the exit) is put on one queue as raw items, stamped with the time it arrived; the consumer
(the recorder) decodes and parses them in a single thread.

The workload's stdout and stderr are pipes drained by the output relay (collectors/output_relay.py),
a small process of its own that appends them to stdout.log / stderr.log in the run folder: the
training never depends on neurondesk being alive, nor on the run folder's disk (full, read-only:
the relay counts what it could not store and says so over its status pipe, as RawRelayStatus).
A tail thread reads the files for the log parsers.
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

from neurondesk.collectors.cgroup_memory import CgroupWatch, watch
from neurondesk.collectors.devices.graph_stats import (
    GraphStatsFolder,
    metrics_environment,
    user_metrics_notice,
)
from neurondesk.collectors.neuron_profile import profile_setup
from neurondesk.collectors.output_tail import OutputTail
from neurondesk.collectors.probe_listener import ProbeListener
from neurondesk.collectors.relay_link import RawRelayStatus, RelayLink, open_output
from neurondesk.collectors.torchneuron import LogPlan, NeffLogTail, torchneuron_environment
from neurondesk.core.events.run_events import Notice, ParseProblem
from neurondesk.core.node.disk import OutputNotStored
from neurondesk.store.input_files import bounded_lines
from neurondesk.store.liveness import pid_running
from neurondesk.store.own_files import NotOurFile
from neurondesk.store.secret_inputs import without_secrets

BOOTSTRAP_DIR = Path(__file__).resolve().parent.parent / "probe" / "bootstrap"
RELAY_END_WAIT_S = 5.0  # after the exit, for the relay to store the last output and end ...
RELAY_END_MAX_S = 120.0  # ... longer while it is still storing (a loaded machine, MBs in the pipe), not longer
MAX_LINE = 1 << 20  # a probe message longer than this is refused unread (output lines: collectors/output_tail.py)
OUTPUT_POLL_S = 0.1  # how often the output files are read while the workload writes (the pace of the main loop)
OUTPUT_IDLE_POLL_S = 0.4  # ... and at least this often while it is quiet
EXIT_GRACE_S = 2.0  # after the main process exits, output of processes it left running is still taken in
NEFF_LOG_POLL_S = 0.25  # how often TorchNeuron's log file is read (collectors/torchneuron.py)


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
class LeftRunning:
    pid: int
    command: str


@dataclass(frozen=True)
class RawExit:
    t: float  # when the main process exited: the run ends (and is billed) up to here
    code: int | None
    left_running: tuple[LeftRunning, ...] = ()  # processes it started that still ran at that moment


class WorkloadStartError(RuntimeError):
    pass


def user_debug_notice(base: dict[str, str]) -> str | None:
    """When the user set torch_xla's debug switches, neurondesk leaves them alone (see
    probe_environment): said once, because graph hashes and torch_xla's compile causes then come
    only from what torch_xla prints on the script's stderr, or not at all."""
    mine = [v for v in ("PT_XLA_DEBUG", "PT_XLA_DEBUG_LEVEL", "PT_XLA_DEBUG_FILE") if v in base]
    if not mine:
        return None
    where = (f"torch_xla writes its analysis to {base['PT_XLA_DEBUG_FILE']!r}, which neurondesk does not read"
             if "PT_XLA_DEBUG_FILE" in base else "they are read from the script's stderr where it prints them")
    return (f"{', '.join(mine)} set by you: neurondesk leaves torch_xla's debug output alone, so graph hashes "
            f"and torch_xla's compile causes may be missing ({where}); unset {' and '.join(mine)} to have them")


def probe_environment(base: dict[str, str], socket_path: str, tag: str | None = None) -> dict[str, str]:
    """The workload's environment: the user's (less neurondesk's own secrets), plus what the probe needs."""
    env = without_secrets(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOTSTRAP_DIR), base.get("PYTHONPATH", "")) if p)
    env["NEURONDESK_SOCKET"] = socket_path
    env.setdefault("PYTHONUNBUFFERED", "1")  # progress lines arrive when printed, not at exit
    if "PT_XLA_DEBUG" not in base and "PT_XLA_DEBUG_LEVEL" not in base:
        # Compile analysis only (level 1: printed once per compile, nothing per step); each probe
        # sends it to a file of its own and reads it back right after the compile.
        env["PT_XLA_DEBUG_LEVEL"] = "1"
        env["NEURONDESK_PTXLA_DEBUG"] = "1"
    if "TORCH_LOGS" not in base:
        # dynamo's recompile reasons and graph breaks come over the probe's socket, not the
        # script's stderr (TORCH_LOGS would print them there): its output stays its own
        env["NEURONDESK_DYNAMO_LOGS"] = "1"
    if tag:
        env.setdefault("NEURON_PROCESS_TAG", tag)
    return env


def wait_for_relay(done: threading.Event, paths: list[Path], quiet_s: float = RELAY_END_WAIT_S,
                   most_s: float = RELAY_END_MAX_S) -> bool:
    """Until the relay says it has ended, or its files stopped growing for ``quiet_s`` (at most
    ``most_s``): on a busy machine it may still be storing megabytes the workload wrote just before
    it exited, and the recorder reads them from the files. True when it ended."""
    def sizes() -> list[int]:
        out = []
        for path in paths:
            try:
                out.append(os.stat(path).st_size)
            except OSError:
                out.append(-1)
        return out

    start = last_growth = time.monotonic()
    seen = sizes()
    while not done.wait(0.1):
        now, now_sizes = time.monotonic(), sizes()
        if now_sizes != seen:
            seen, last_growth = now_sizes, now
        elif now - last_growth >= quiet_s or now - start >= most_s:
            return False
    return True


class WorkloadProcess:
    """The workload writes its stdout and stderr into pipes drained by the output relay, a process
    of its own that appends them to ``stdout_path`` / ``stderr_path`` in the run folder: neither the
    death of neurondesk nor a full or read-only disk can fail or block a ``print`` of the training
    (the relay counts what it could not store; its status lines come here as RawRelayStatus). This
    object keeps its own copies of the pipes' read ends, and drains them itself if the relay is
    killed. A tail thread reads the files as they grow and queues their lines."""

    def __init__(self, command: list[str], out: queue.SimpleQueue, *, stdout_path: Path, stderr_path: Path,
                 cwd: str | None = None, env: dict[str, str] | None = None, tag: str | None = None,
                 neuron_profile: bool = False) -> None:
        self.command = command
        self.out = out
        self.cwd = cwd
        self.base_env = dict(os.environ if env is None else env)
        self.tag = tag
        self.output_paths = {"stdout": Path(stdout_path), "stderr": Path(stderr_path)}
        self.proc: subprocess.Popen | None = None
        self.sock_dir = tempfile.mkdtemp(prefix="nd-")  # short: Unix socket paths max ~107 bytes
        self.socket_path = os.path.join(self.sock_dir, "probe.sock")
        self.listener: ProbeListener | None = None  # the probes' socket (collectors/probe_listener.py)
        self.threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        self.exited = threading.Event()
        self.output_done = threading.Event()  # the exit and the grace for processes left running are over
        self.sent_signal: str | None = None
        self.signal_sent_at = 0.0  # monotonic: when sent_signal was sent
        self.link = RelayLink(self.output_paths, out, self._spawn)  # the output relay, from this side
        self.graph_stats_dir: Path | None = None  # where torch-neuronx writes its graph_stats tables at exit
        self.neuron_profile = neuron_profile  # --neuron-profile: a Neuron Explorer capture into the run folder
        self.cgroup: CgroupWatch | None = None  # its memory cgroup: limit and OOM kills (collectors/cgroup_memory.py)
        self.neuron_log: LogPlan | None = None  # TorchNeuron's log file, read as it grows (collectors/torchneuron.py)

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        exe = shutil.which(self.command[0], path=self.base_env.get("PATH")) if self.command else None
        if exe is None:
            self.cleanup()
            raise WorkloadStartError(
                f"cannot start the workload: {self.command[0] if self.command else '(empty command)'!r} "
                "is not an executable on PATH; check the command after `--`")
        self.listener = ProbeListener(self.socket_path, self._read_probe, self._spawn)
        env = probe_environment(self.base_env, self.socket_path, self.tag)
        extra, self.graph_stats_dir = metrics_environment(self.base_env, self.output_paths["stdout"].parent)
        env.update(extra)  # TorchNeuron's graph_stats tables, read at exit (_read_graph_stats)
        self._profile_setup(env)
        extra, self.neuron_log = torchneuron_environment(self.base_env, self.output_paths["stdout"].parent)
        env.update(extra)  # TorchNeuron's metrics on, its log to a file of the run folder
        for text in self.neuron_log.notes:
            self.out.put(Notice(t=time.time(), level="warn", source="torchneuron", message=text))
        note = user_metrics_notice(self.base_env)
        if note:
            self.out.put(Notice(t=time.time(), level="warn" if "not read" in note else "info", source="graph_stats",
                                message=note))
        try:
            files = self.link.start()
            if files is None:  # no relay: the files themselves, as before it existed (said in relay_problem)
                files = {name: open_output(path, self.link.file_ids.get(name)) for name, path in self.output_paths.items()}
        except NotOurFile as exc:  # planted after the folder check: refused before the workload starts
            self.cleanup()
            raise WorkloadStartError(str(exc)) from exc
        try:
            self.proc = subprocess.Popen(
                self.command, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=files["stdout"], stderr=files["stderr"],
                start_new_session=True,  # its own process group, out of the terminal's reach (SIGHUP)
            )
        except OSError as exc:
            self.cleanup()
            raise WorkloadStartError(f"cannot start the workload {self.command[0]!r}: {exc.strerror or exc}") from exc
        finally:
            for fd in files.values():
                os.close(fd)  # the relay ends when the workload and its children have closed theirs
        self.cgroup = CgroupWatch(self.proc.pid)
        self._spawn(lambda: watch(self.cgroup, self.out.put, self.exited), "nd-cgroup")
        self._spawn(self._tail_output, "nd-output")
        self._spawn(self._tail_neuron_log, "nd-torchneuron")
        self._spawn(self._wait_exit, "nd-wait")

    @property
    def relay(self) -> subprocess.Popen | None:
        return self.link.relay

    @property
    def relay_problem(self) -> str | None:
        """Why the output goes to the files directly (None: the relay drains it)."""
        return self.link.problem

    def _spawn(self, target, name: str) -> threading.Thread:
        th = threading.Thread(target=target, name=name, daemon=True)
        th.start()
        self.threads.append(th)
        return th

    def _read_probe(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            for line, over in bounded_lines(f, MAX_LINE):  # a line over the bound is never held
                self.out.put(RawProbe(time.time(), line) if not over else ParseProblem(
                    t=time.time(), source="probe", raw="",
                    error=f"a probe message of {over:,} bytes, over the {MAX_LINE >> 20} MiB one can be: refused unread"))

    def _tail_output(self) -> None:
        tails = [OutputTail(path, stream) for stream, path in self.output_paths.items()]
        wait = OUTPUT_POLL_S
        try:
            while True:
                done = self.output_done.is_set()  # read once more at the end: the last lines
                took = False
                for tail in tails:
                    for text in tail.read_lines(final=done):
                        self.out.put(RawOutput(time.time(), tail.stream, text))
                        took = True
                if done:
                    return
                # a quiet workload is read less often (up to OUTPUT_IDLE_POLL_S); output: at once again
                wait = OUTPUT_POLL_S if took else min(OUTPUT_IDLE_POLL_S, wait * 2)
                self.output_done.wait(wait)
        finally:
            for tail in tails:
                tail.close()

    def _tail_neuron_log(self) -> None:
        """TorchNeuron's log, read while the workload runs and once more when it has exited."""
        tail = NeffLogTail(self.neuron_log, self.output_paths, self.link.file_ids)
        try:
            while True:
                done = self.exited.is_set()
                for e in tail.poll(time.time(), final=done):
                    self.out.put(e)
                if done:
                    return
                self.exited.wait(NEFF_LOG_POLL_S)
        finally:
            tail.close()

    def _wait_exit(self) -> None:
        """The run ends when the main process exits. Processes it left running (same session) are
        named; their output and probe messages are still taken in for EXIT_GRACE_S, not longer."""
        code = self.proc.wait()
        exit_t = time.time()
        self.exited.set()
        self.out.put(self.cgroup.final(exit_t))  # its limit and OOM kills, for the account of its end (core/findings/crash.py)
        left = left_running(self.proc.pid)
        deadline = time.monotonic() + (EXIT_GRACE_S if left else 0.0)
        while left and time.monotonic() < deadline:
            time.sleep(OUTPUT_POLL_S)
            left = [p for p in left if pid_running(p.pid)]
        # the relay stores the last output, then ends (unless a process left running holds the pipes)
        if left:
            self.link.done.wait(0.2)
        else:
            wait_for_relay(self.link.done, list(self.output_paths.values()))
        for th in list(self.threads):
            if th.name == "nd-torchneuron":
                th.join(timeout=5)  # its last lines, and those it passes on to the output, before the output ends
        self.output_done.set()
        for th in list(self.threads):
            if th.name == "nd-output":
                th.join(timeout=5)  # the last output lines arrive before the exit
        # the probes' last messages, those still in the socket's backlog too; one bound for all connections
        self.listener.drain(time.monotonic() + 1.0)
        self._read_graph_stats()
        self.out.put(RawExit(exit_t, code, tuple(left)))

    def _profile_setup(self, env: dict[str, str]) -> None:
        """A Neuron Explorer capture (--neuron-profile, or the user's own switch): its variables, the
        event naming its folder, and a warning when torch.profiler is on too."""
        setup = profile_setup(self.base_env, self.output_paths["stdout"].parent, self.neuron_profile, self.command,
                              self.cwd, time.time())
        env.update(setup.env)
        if setup.event is not None:
            self.out.put(setup.event)
        for text in setup.warnings:
            self.out.put(Notice(t=time.time(), level="warn", source="neuron-profile", message=text))

    def _read_graph_stats(self) -> None:
        """torch-neuronx writes its graph_stats tables as each rank exits: read them before the
        exit is queued, so the run's record has them."""
        if self.graph_stats_dir is None:
            return
        try:
            for e in GraphStatsFolder(self.graph_stats_dir).poll(time.time()):
                self.out.put(e)
        except Exception as exc:  # noqa: BLE001 - the run's end is recorded whatever the tables hold
            self.out.put(Notice(t=time.time(), level="warn", source="graph_stats",
                                message=f"TorchNeuron's graph_stats tables in {self.graph_stats_dir} not read: {exc!r}"))

    # ------------------------------------------------------------------ control
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if not self.running():
            return
        name = signal.Signals(sig).name
        now = time.monotonic()
        why = f" (still running {now - self.signal_sent_at:.0f} s after {self.sent_signal})" if self.sent_signal else ""
        self.sent_signal, self.signal_sent_at = name, now
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return
        # journaled: which signal ended the run, and when each was sent, is part of its account
        self.out.put(Notice(t=time.time(), level="info", source="stop",
                            message=f"{name} sent to the workload{why}"))

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
        if self.listener is not None:
            self.listener.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)


def relay_event(raw: RawRelayStatus):
    """The relay's status line as an event (OutputNotStored; a Notice when the relay reports an
    error of its own); None for what is not news (its ready line) or not valid (counted nowhere:
    the next line carries the same totals)."""
    f = raw.fields
    if f.get("refused"):  # a file at the output's path that neurondesk did not make: moved aside, never written
        return Notice(t=raw.t, level="error", source="output", message=str(f.get("message", ""))[:1000])
    if f.get("taken_over"):
        return Notice(t=raw.t, level="error", source="output", message=str(f.get("message", ""))[:500])
    if "error" in f:
        return Notice(t=raw.t, level="error", source="output", message=(
            f"the output relay failed ({str(f['error'])[:300]}); it drains the workload's output and "
            "discards it from now on, so the training goes on"))
    stream, lost, pending = f.get("stream"), f.get("lost_bytes"), f.get("pending_bytes", 0)
    if stream not in ("stdout", "stderr") or not isinstance(lost, int) or not isinstance(pending, int):
        return None
    first = f.get("first_t")
    reason = f.get("reason")
    return OutputNotStored(t=raw.t, stream=stream, lost_bytes=lost, pending_bytes=pending,
                           reason=reason if isinstance(reason, str) else None,
                           first_t=float(first) if isinstance(first, int | float) else None,
                           storing=bool(f.get("storing")), final=bool(f.get("final")))


def left_running(session_id: int) -> list[LeftRunning]:
    """Live processes of the workload's session (it was started in a session of its own, so its
    children are in it unless they made their own); zombies are not counted."""
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit() or int(name) == session_id:
            continue
        pid = int(name)
        try:
            if os.getsid(pid) != session_id or not pid_running(pid):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        found.append(LeftRunning(pid, command or f"pid {pid}"))
    return found
