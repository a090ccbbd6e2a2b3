"""Is a run's recorder alive? It holds an exclusive flock on ``recorder.lock`` for as long as it
lives; the kernel drops the lock when the process dies, however it dies (SIGKILL included), so
a viewer never mistakes a reused pid or a stale file for a live recorder.

``recorder.json`` beside it says where to reach that recorder (pid, control socket, workload pid).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from neurondesk.store.input_files import read_regular
from neurondesk.store.own_files import (
    FileId,
    NotOurFile,
    create_new,
    planted_words,
    private_file_problem,
    reopen_same,
)
from neurondesk.store.rundir import RunPaths
from neurondesk.store.summary_files import write_atomic

MAX_PID = 2**22  # the kernel's PID_MAX_LIMIT on 64-bit Linux: a pid past it is no process's
LOCK_TAKEN_EXIT = 75  # the recorder's exit status when another recorder owns its folder (EX_TEMPFAIL)


@dataclass(frozen=True)
class RecorderInfo:
    pid: int
    control_socket: str
    workload_pid: int | None = None


class FolderTaken(RuntimeError):
    """Another recorder holds the folder's lock; the message is one line naming it."""


class RecorderLock:
    """Held by the recorder process. Not inherited by the workload (Python fds are not inheritable).
    The file holds the holder's pid, so that a launcher knows whether the recorder it started is
    the one that owns the folder."""

    def __init__(self, run_dir: Path, expect: FileId | None = None, stamp: bool = True) -> None:
        """``expect``: the lock file the launcher made or checked (claim_lock_file), which this
        must be; without it the file is made now, or must be a private file of this user's.
        ``stamp=False``: the pid is written later (``stamp()``): the recorder does it once its journal
        is open, so a launcher that reads its pid there knows the journal is that recorder's."""
        self.path = RunPaths(run_dir).recorder_lock
        if expect is not None:
            self.fd = reopen_same(self.path, os.O_RDWR | os.O_NONBLOCK, expect, LOCK_WHAT)
        else:
            self.fd = _open_lock(self.path)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self.fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise FolderTaken(live_owner(run_dir) or f"another recorder owns {run_dir}; each run folder "
                              "has one recorder: give another --run-dir") from exc
        if stamp:
            self.stamp()

    def stamp(self) -> None:
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same; a launcher then waits for its recorder's exit

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


LOCK_WHAT = "the run folder's lock file"


def _open_lock(path: Path) -> int:
    """The lock file, made now; or the one there, if it is a private regular file of this user's
    with one name (a previous run's: the lock is never moved aside). Checked on the open file."""
    try:
        return create_new(path, os.O_RDWR | os.O_NONBLOCK, LOCK_WHAT)[0]
    except NotOurFile:
        pass
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # a symlink, a socket, a folder
            raise NotOurFile(planted_words(path, LOCK_WHAT, "a symbolic link" if exc.errno == errno.ELOOP
                                           else "no regular file")) from exc
        raise
    why = private_file_problem(os.fstat(fd))
    if why is not None:
        os.close(fd)
        raise NotOurFile(planted_words(path, LOCK_WHAT, f"a file that is no private file of yours ({why})"))
    return fd


def claim_lock_file(run_dir: Path | str) -> FileId:
    """The launcher's side: the folder's lock file made (or the private one there checked), and
    which file it is, for the recorder to open that one and no other (RecorderLock's ``expect``)."""
    fd = _open_lock(RunPaths(run_dir).recorder_lock)
    try:
        if os.fstat(fd).st_size == 0:
            try:  # no recorder's pid yet: a launcher waits until its own recorder's is there
                os.pwrite(fd, b"0\n", 0)
            except OSError:
                pass
        return FileId.of_fd(fd)
    finally:
        os.close(fd)


def recorder_alive(run_dir: Path | str) -> bool:
    """True while the recorder that owns ``run_dir`` runs."""
    try:
        fd = os.open(RunPaths(run_dir).recorder_lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False  # never started, or a run recorded before recorders existed
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # we got it: nobody holds it
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)


def lock_holder_pid(run_dir: Path | str) -> int | None:
    """The pid the folder's lock file names (its last holder's; live or not: see recorder_alive)."""
    try:
        fd = os.open(RunPaths(run_dir).recorder_lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        raw = os.read(fd, 32)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return int(raw.strip() or b"x")
    except ValueError:
        return None


def live_owner(run_dir: Path | str) -> str | None:
    """One line naming the live recorder that owns ``run_dir`` (and its workload), or None when none does."""
    if not recorder_alive(run_dir):
        return None
    info = read_recorder_info(run_dir)
    pid = lock_holder_pid(run_dir) or (info.pid if info else None)
    workload = f", workload pid {info.workload_pid}" if info and info.workload_pid else ""
    return (f"another recorder owns {run_dir} (recorder pid {pid if pid else '?'}{workload}): its run is still "
            f"being recorded there; give another --run-dir, or watch that run with `neurondesk attach {run_dir}`")


def pid_running(pid: int) -> bool:
    """The process ``pid`` exists and is not a zombie (another user's counts as running)."""
    if not 0 < pid <= MAX_PID:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read(4096).rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")  # a zombie has exited
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True  # another user's: it exists
        return True


def write_recorder_info(run_dir: Path, info: RecorderInfo) -> None:
    write_atomic(RunPaths(run_dir).recorder_info, json.dumps(asdict(info)))


def read_recorder_info(run_dir: Path | str) -> RecorderInfo | None:
    try:
        d = json.loads(read_regular(RunPaths(run_dir).recorder_info, "recorder.json", 1 << 16, follow=False))
        info = RecorderInfo(pid=int(d["pid"]), control_socket=str(d["control_socket"]),
                            workload_pid=None if d.get("workload_pid") is None else int(d["workload_pid"]))
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError, AttributeError):
        return None  # found by benchmarks/fuzz.py: Infinity, 1e308, deep nesting, a list for the object
    pids = (info.pid, info.workload_pid if info.workload_pid is not None else 1)
    return info if all(0 < p <= MAX_PID for p in pids) else None
