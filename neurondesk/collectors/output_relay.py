"""The workload's output relay: a small process of its own between the workload's stdout/stderr
pipes and the files stdout.log / stderr.log of the run folder.

Why a process: the training must never fail or block on a ``print``, whatever the state of the
run folder's disk (full, read-only, removed files, I/O errors) and whether or not neurondesk is
alive. The workload writes into pipes; this process drains them at once into memory, and a writer
thread appends what it holds to the files. A write that fails is retried every RETRY_S (the disk
may free); what cannot be held (more than BACKLOG_MAX per stream) is dropped and counted. The
recorder hears about it over a non-blocking status pipe (JSON lines, totals); a recorder that
died is ignored.

It runs in a session of its own (started so by the recorder), ignores the signals that end
processes by accident (Ctrl-C, a closed terminal, SIGTERM to a process group or a ``pkill``) and
ends only when every pipe it drains is closed: the workload and every child holding its output
are gone. SIGKILL still ends it.

Standard library only, and run as a script (``python -I -S output_relay.py``): it imports nothing
of neurondesk and nothing of the workload's environment.

    output_relay.py --status-fd FD [--final-wait S] --stream NAME FD PATH [--file-id DEV:INO] [--stream ...]
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import sys
import threading
import time

READ_MAX = 1 << 20  # bytes taken from one pipe per wake-up
BACKLOG_MAX = 8 << 20  # per stream: held in memory while the file cannot be written; beyond, dropped
RETRY_S = 1.0  # after a failed write, the next try
REPORT_S = 1.0  # status lines while counts change: at most this often
FINAL_WRITE_WAIT_S = 10.0  # at the end, how long a stuck writer (a hung disk) is waited for
IGNORED = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGUSR1", "SIGUSR2",
           "SIGPIPE", "SIGXFSZ")
REASONS = {
    errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only filesystem",
    errno.EPERM: "not permitted", errno.EACCES: "permission denied", errno.EIO: "I/O error",
    errno.EFBIG: "file too large", errno.ENOENT: "run folder removed", errno.ELOOP: "a symlink in its place",
}


def reason_of(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{REASONS.get(exc.errno or 0, exc.strerror or 'error')} ({name})"


class Stream:
    """One output stream: its pipe, its file, what is held and what was lost."""

    def __init__(self, name: str, fd: int, path: str, file_id: tuple[int, int] | None = None) -> None:
        self.name = name
        self.fd = fd
        self.path = path
        self.file_id = file_id  # (st_dev, st_ino) of the file made for this stream: the only one written
        self.refusals: list[str] = []  # files found at the path that were not that one, said once each
        # the run folder, held open (for reading: no writer that keeps a read-only remount away), so
        # that the file is found in it when the folder is moved while the run goes on
        try:
            self.dir_fd: int | None = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self.dir_fd = None
        self.open = True
        self.backlog = bytearray()  # read from the pipe, not yet in the file
        self.taken = 0  # bytes read from the pipe: the backlog's first byte is at taken - len(backlog)
        self.stored = 0  # bytes written to the file
        self.lost = 0  # bytes dropped for good
        self.reason: str | None = None  # why the last write failed; None while writes succeed
        self.first_t: float | None = None  # the first failure
        self.failed_t: float | None = None  # the last failure (the next try waits RETRY_S)
        self.last_reason: str | None = None  # why the latest failure happened (kept once writes succeed again)

    @property
    def head(self) -> int:
        return self.taken - len(self.backlog)

    def take(self, data: bytes) -> None:
        self.backlog += data
        self.taken += len(data)
        over = len(self.backlog) - BACKLOG_MAX
        if over > 0:  # the oldest held bytes go: the file keeps the latest output when it can write again
            del self.backlog[:over]
            self.lost += over
            if self.reason is None:  # no write failed: the last one has not returned (a disk that hangs)
                self.reason = self.last_reason = "the disk did not keep up"
                self.first_t = self.first_t or time.time()

    def state(self) -> tuple:
        return (self.lost, len(self.backlog) if self.reason else 0, self.reason)

    def status(self, now: float, final: bool = False) -> dict:
        return {"stream": self.name, "t": now, "lost_bytes": self.lost,
                "pending_bytes": len(self.backlog) if self.reason else 0, "stored_bytes": self.stored,
                "reason": self.reason or self.last_reason, "first_t": self.first_t,
                "storing": self.reason is None, "final": final,
                "file": list(self.file_id) if self.file_id else None}


class Relay:
    def __init__(self, streams: list[Stream], status_fd: int | None, final_wait_s: float = FINAL_WRITE_WAIT_S) -> None:
        self.streams = streams
        self.final_wait_s = final_wait_s
        self.status_fd = status_fd
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.ending = False
        self.reported: dict[str, tuple] = {}
        self.last_report = 0.0

    # ------------------------------------------------------------------ status to the recorder
    def send(self, message: dict) -> None:
        if self.status_fd is None:
            return
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        try:
            os.write(self.status_fd, line)  # under PIPE_BUF: whole, or EAGAIN
        except BlockingIOError:
            pass  # the recorder is behind; totals go again with the next change
        except OSError:  # the recorder is gone: nobody to tell
            os.close(self.status_fd)
            self.status_fd = None

    def report(self, now: float, force: bool = False, final: bool = False) -> None:
        """A status line per stream whose counts or state changed (at most every REPORT_S, a
        change of state at once)."""
        with self.lock:
            states = [(s, s.state(), s.status(now, final)) for s in self.streams]
            refusals = [(s.name, words) for s in self.streams for words in s.refusals]
            for s in self.streams:
                s.refusals.clear()
        for name, words in refusals:
            self.send({"refused": True, "stream": name, "message": words})
        sent = False
        for s, state, message in states:
            before = self.reported.get(s.name, (0, 0, None))
            if state == before and not final:
                continue
            changed_kind = (before[2] is None) != (state[2] is None)
            if final or force or changed_kind or now - self.last_report >= REPORT_S:
                if final and state == (0, 0, None) and not s.first_t:
                    continue
                self.reported[s.name] = state
                self.send(message)
                sent = True
        if sent:
            self.last_report = now

    # ------------------------------------------------------------------ the writer thread
    def write_loop(self) -> None:
        while True:
            with self.lock:
                while not self.ending and not self._due(time.monotonic()):
                    self.wake.wait(timeout=RETRY_S if any(s.backlog for s in self.streams) else None)
                ending = self.ending
                work = [(s, s.head, bytes(s.backlog)) for s in self.streams if s.backlog and self._retry_due(s)]
            for s, head, data in work:
                self._store(s, head, data)
            if ending:
                with self.lock:
                    if not any(s.backlog and self._retry_due(s) for s in self.streams):
                        return

    def _retry_due(self, s: Stream) -> bool:
        return s.failed_t is None or self.ending or time.monotonic() - s.failed_t >= RETRY_S

    def _due(self, now: float) -> bool:
        return any(s.backlog and (s.failed_t is None or now - s.failed_t >= RETRY_S) for s in self.streams)

    def _store(self, s: Stream, head: int, data: bytes) -> None:
        """Append ``data`` (the backlog from stream offset ``head``) to the file, opened for this
        write only (in the run folder, wherever it was moved): a removed file is made again, and no
        open file keeps a read-only remount away."""
        written = 0
        error: OSError | None = None
        try:
            fd = self._open_own(s)
            try:
                while written < len(data):
                    written += os.write(fd, data[written:])
            finally:
                os.close(fd)
        except OSError as exc:
            error = exc
        with self.lock:
            # the backlog may have been cut from the front meanwhile (take()): what was cut and yet
            # written is stored, not lost; what was written and is still held leaves the backlog
            cut = s.head - head
            s.lost -= min(cut, written)
            del s.backlog[:max(0, written - cut)]
            s.stored += written
            if error is None:
                s.reason, s.failed_t = None, None
            else:
                s.reason = s.last_reason = reason_of(error)
                s.failed_t = time.monotonic()
                s.first_t = s.first_t or time.time()
                if self.ending:  # the last try failed: what is left is lost
                    s.lost += len(s.backlog)
                    s.backlog.clear()

    def _open_own(self, s: Stream) -> int:
        """The stream's file, only when it is the one made for it (``file_id``); a file that is gone is
        made again (O_EXCL); anything else at the path (a file or symlink planted there, a FIFO) is
        never written through: it is moved aside, said once, and a new file made in its place."""
        name, where = (os.path.basename(s.path), {"dir_fd": s.dir_fd}) if s.dir_fd is not None else (s.path, {})
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags | os.O_NONBLOCK, **where)  # a FIFO never blocks the open
        except FileNotFoundError:
            return self._make(s, name, where, flags)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO):  # a symlink; a FIFO or socket with no reader
                raise
            kind = "a symbolic link" if exc.errno == errno.ELOOP else "not a regular file"
        else:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == s.file_id:
                os.set_blocking(fd, True)  # ours: written as any file is (O_NONBLOCK was for the open only)
                return fd
            os.close(fd)
            kind = "another file" if s.file_id else "a file neurondesk did not make"
        aside = f"{name}.not-neurondesk-{os.getpid()}-{time.time_ns()}"
        os.rename(name, aside, src_dir_fd=where.get("dir_fd"), dst_dir_fd=where.get("dir_fd"))
        s.file_id = None
        s.refusals.append(
            f"refusing {s.path}: it was {kind}, not the file neurondesk made for the workload's {s.name}, and was "
            f"never written through; moved aside to {os.path.basename(aside)} (look at it, then remove it); the "
            f"output goes on in a new {name}")
        return self._make(s, name, where, flags)

    @staticmethod
    def _make(s: Stream, name: str, where: dict, flags: int) -> int:
        fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o600, **where)  # ours: made by this open
        st = os.fstat(fd)
        s.file_id = (st.st_dev, st.st_ino)
        return fd

    # ------------------------------------------------------------------ the reader (main thread)
    def run(self) -> None:
        writer = threading.Thread(target=self.write_loop, name="relay-writer", daemon=True)
        writer.start()
        self.send({"ready": True, "pid": os.getpid()})
        by_fd = {s.fd: s for s in self.streams}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while by_fd:
            ready = poller.poll(int(REPORT_S * 1000))
            for fd, _ in ready:
                s = by_fd[fd]
                try:
                    data = os.read(fd, READ_MAX)
                except InterruptedError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    poller.unregister(fd)
                    os.close(fd)
                    s.open = False
                    del by_fd[fd]
                    continue
                with self.lock:
                    s.take(data)
                    self.wake.notify()
            self.report(time.time())
        with self.lock:
            self.ending = True
            self.wake.notify()
        writer.join(self.final_wait_s)
        with self.lock:
            if writer.is_alive():  # a write hangs (a disk that does not answer): what is held is lost
                for s in self.streams:
                    s.lost += len(s.backlog)
                    s.backlog.clear()
                    s.reason = s.last_reason = "the disk did not answer"
                    s.first_t = s.first_t or time.time()
        self.report(time.time(), final=True)
        self.send({"end": True})  # the last word: without it, the recorder knows the relay was killed


def parse_args(argv: list[str]) -> tuple[int | None, list[Stream], float]:
    status_fd, streams, i, final_wait = None, [], 0, FINAL_WRITE_WAIT_S
    while i < len(argv):
        if argv[i] == "--status-fd":
            status_fd = int(argv[i + 1])
            i += 2
        elif argv[i] == "--final-wait":
            final_wait = float(argv[i + 1])
            i += 2
        elif argv[i] == "--stream":
            streams.append(Stream(argv[i + 1], int(argv[i + 2]), argv[i + 3]))
            i += 4
        elif argv[i] == "--file-id" and streams:  # DEV:INO of the file made for the stream before it
            dev, _, ino = argv[i + 1].partition(":")
            streams[-1].file_id = (int(dev), int(ino))
            i += 2
        else:
            raise SystemExit(f"output_relay: unknown argument {argv[i]!r}")
    return status_fd, streams, final_wait


def main(argv: list[str]) -> int:
    for name in IGNORED:
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    status_fd, streams, final_wait = parse_args(argv)
    if status_fd is not None:
        os.set_blocking(status_fd, False)
    relay = Relay(streams, status_fd, final_wait)
    try:
        relay.run()
    except BaseException as exc:  # a bug here must not leave the pipes undrained: drain and discard
        relay.send({"error": f"{type(exc).__name__}: {exc}"[:2000]})
        _discard(streams)
        return 1
    return 0


def _discard(streams: list[Stream]) -> None:
    """The last resort: keep the workload's writes from failing by reading its pipes to the end."""
    fds = [s.fd for s in streams if s.open]
    while fds:
        ready, _, _ = select.select(fds, [], [])
        for fd in ready:
            try:
                if not os.read(fd, READ_MAX):
                    fds.remove(fd)
            except OSError:
                fds.remove(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
