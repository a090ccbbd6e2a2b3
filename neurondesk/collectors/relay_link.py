"""The output relay seen from the recorder: start it (collectors/output_relay.py, a process of its
own that drains the workload's stdout and stderr pipes into the run folder), read its status lines,
and drain the pipes here if it is killed while the workload runs."""

from __future__ import annotations

import fcntl
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neurondesk.collectors.output_relay import Relay, Stream
from neurondesk.collectors.probe_lifelines import death_signal
from neurondesk.store.own_files import FileId, NotOurFile, create_new, reopen_same

RELAY_SCRIPT = Path(__file__).resolve().parent / "output_relay.py"
RELAY_READY_S = 15.0  # for the relay to say it is up; past this the output goes to the files directly
PIPE_SIZE = 1 << 20  # the workload's output pipes: room for bursts while the relay catches up


@dataclass(frozen=True)
class RawRelayStatus:
    """A status line of the output relay (its totals for one stream), decoded JSON."""

    t: float
    fields: dict


OUTPUT_WHAT = "the workload's output file"


def open_output(path: Path, file_id: FileId | None) -> int:
    """The workload's own output file (no relay): the one made for it (``file_id``), else one made now
    (appended to, private to the user, never through a symlink, never a file planted there)."""
    if file_id is not None:
        return reopen_same(path, os.O_WRONLY | os.O_APPEND, file_id, OUTPUT_WHAT)
    return create_new(path, os.O_WRONLY | os.O_APPEND, OUTPUT_WHAT)[0]


class RelayLink:
    """``start()`` gives the write ends of the pipes the workload writes into (None: no relay, and
    ``problem`` says why). ``done`` is set when the relay ended: all it could store is in the files.
    Our own copies of the pipes' read ends are kept, to drain them here if the relay is killed."""

    def __init__(self, output_paths: dict[str, Path], out: queue.SimpleQueue,
                 spawn: Callable[[Callable[[], None], str], threading.Thread]) -> None:
        self.output_paths, self.out, self.spawn = output_paths, out, spawn
        self.relay: subprocess.Popen | None = None
        self.done = threading.Event()
        self.problem: str | None = None
        self._rest = b""
        self._spare_pipes: dict[str, int] = {}
        self.file_ids: dict[str, FileId] = {}  # the output files made for the run (the relay reports new ones)

    def start(self) -> dict[str, int] | None:
        """Start the output relay; returns the write ends of the pipes it drains (for the workload),
        or None when it could not start (``relay_problem`` says why)."""
        for name, path in self.output_paths.items():  # there from the start, as viewers expect (empty)
            try:  # made by this open: one planted there (NotOurFile) is refused, the workload not started
                fd, self.file_ids[name] = create_new(path, os.O_WRONLY | os.O_APPEND, OUTPUT_WHAT)
                os.close(fd)
            except NotOurFile:
                raise
            except OSError:
                pass  # a disk that refuses: the relay makes it (O_EXCL) at its first write, or says why
        pipes = {name: os.pipe() for name in self.output_paths}
        status_r, status_w = os.pipe()
        args = [sys.executable, "-I", "-S", str(RELAY_SCRIPT), "--status-fd", str(status_w)]
        for name, path in self.output_paths.items():
            fid = self.file_ids.get(name)
            args += ["--stream", name, str(pipes[name][0]), str(path)] + (["--file-id", f"{fid.dev}:{fid.ino}"] if fid else [])
            try:
                fcntl.fcntl(pipes[name][1], fcntl.F_SETPIPE_SZ, PIPE_SIZE)
            except OSError:
                pass  # the default size (64 KiB) still works
        try:
            self.relay = subprocess.Popen(
                args, pass_fds=[status_w, *(r for r, _ in pipes.values())], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                start_new_session=True,  # away from the terminal and from the workload's group
            )
        except OSError as exc:
            self.problem = f"the output relay did not start ({exc.strerror or exc})"
        finally:
            os.close(status_w)
            for name, (r, _) in pipes.items():
                if self.relay is not None:
                    self._spare_pipes[name] = os.dup(r)  # not inherited by the workload (non-inheritable)
                os.close(r)
        ready = self.relay is not None and self._ready(status_r)
        if not ready:
            os.close(status_r)
            for _, w in pipes.values():
                os.close(w)
            if self.relay is not None:
                self.problem = self.problem or "the output relay did not answer"
                self.relay.kill()
                self.relay.wait()
                self.relay = None
            for spare in self._spare_pipes.values():
                os.close(spare)
            self._spare_pipes = {}
            self.done.set()
            return None
        self.spawn(lambda: self._read(status_r), "nd-relay")
        return {name: w for name, (_, w) in pipes.items()}

    def _ready(self, fd: int) -> bool:
        deadline = time.monotonic() + RELAY_READY_S
        got = b""
        while b"\n" not in got:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            got += chunk
        line, _, self._rest = got.partition(b"\n")
        try:
            return bool(json.loads(line).get("ready"))
        except ValueError:
            return False

    def _read(self, fd: int) -> None:
        """The relay's status lines, to the queue; at its end (EOF) it has stored all it could. A
        relay that ended without its last word (killed) leaves the pipes to the recorder, which
        drains them itself from then on (the same code, in a thread)."""
        ended = False
        try:
            ended = self._status_lines(fd, self._rest)
        finally:
            if self.relay is not None:
                try:
                    self.relay.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            try:
                if not ended:
                    self._take_over()
            finally:
                for spare in self._spare_pipes.values():
                    os.close(spare)
                self._spare_pipes = {}
                self.done.set()

    def _status_lines(self, fd: int, first: bytes = b"") -> bool:
        """Queue a relay's status lines until its pipe closes; True when it said its last word."""
        ended = False
        with os.fdopen(fd, "rb") as f:
            for line in _prefixed(first, f):
                try:
                    fields = json.loads(line)
                except ValueError:
                    continue
                if isinstance(fields, dict):
                    ended = ended or bool(fields.get("end"))
                    made = fields.get("file")  # the file the relay writes now (made again when removed)
                    if fields.get("stream") in self.output_paths and isinstance(made, list) and len(made) == 2:
                        self.file_ids[fields["stream"]] = FileId(int(made[0]), int(made[1]))
                    self.out.put(RawRelayStatus(time.time(), fields))
        return ended

    def _take_over(self) -> None:
        """The relay died while the pipes were open: drain them here until they close."""
        if not self._spare_pipes:
            return
        code = self.relay.returncode if self.relay is not None else None
        sig = death_signal(code)
        how = f"killed by {sig}" if sig else f"with status {code}"
        self.out.put(RawRelayStatus(time.time(), {"taken_over": True, "message": (
            f"the output relay (pid {self.relay.pid if self.relay else '?'}) ended {how} while the workload "
            "ran; the recorder drains the workload's output itself from now on (if the recorder ends too, "
            "the workload's next write to stdout or stderr fails)")}))
        status_r, status_w = os.pipe()
        os.set_blocking(status_w, False)
        streams = [Stream(name, fd, str(self.output_paths[name]),
                          (self.file_ids[name].dev, self.file_ids[name].ino) if name in self.file_ids else None)
                   for name, fd in self._spare_pipes.items()]
        self._spare_pipes = {}  # the relay object owns (and closes) them now
        relay = Relay(streams, status_w)

        def run() -> None:
            try:
                relay.run()
            finally:
                if relay.status_fd is not None:
                    os.close(relay.status_fd)
        th = threading.Thread(target=run, name="nd-relay-here", daemon=True)
        th.start()
        self._status_lines(status_r)
        th.join(timeout=5)


def _prefixed(first: bytes, f):
    """The lines of ``f``, after those already read of it (``first``)."""
    while b"\n" in first:
        line, _, first = first.partition(b"\n")
        yield line + b"\n"
    if first:
        yield first + f.readline()
    yield from f
