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

from neurondesk.store.rundir import RECORDER_INFO, RECORDER_LOCK
from neurondesk.store.summary_files import write_atomic


@dataclass(frozen=True)
class RecorderInfo:
    pid: int
    control_socket: str
    workload_pid: int | None = None


class RecorderLock:
    """Held by the recorder process. Not inherited by the workload (Python fds are not inheritable)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RECORDER_LOCK
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self.fd)
            raise RuntimeError(f"another recorder owns {run_dir} ({exc.strerror}); "
                               "each run folder has one recorder") from exc

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def recorder_alive(run_dir: Path | str) -> bool:
    """True while the recorder that owns ``run_dir`` runs."""
    try:
        fd = os.open(Path(run_dir) / RECORDER_LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False  # never started, or a run recorded before recorders existed
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # we got it: nobody holds it
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)


def write_recorder_info(run_dir: Path, info: RecorderInfo) -> None:
    write_atomic(Path(run_dir) / RECORDER_INFO, json.dumps(asdict(info)))


def read_recorder_info(run_dir: Path | str) -> RecorderInfo | None:
    try:
        d = json.loads((Path(run_dir) / RECORDER_INFO).read_text(encoding="utf-8"))
        return RecorderInfo(pid=int(d["pid"]), control_socket=str(d["control_socket"]),
                            workload_pid=None if d.get("workload_pid") is None else int(d["workload_pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
