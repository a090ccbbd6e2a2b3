"""PyTorch's Flight Recorder dump, taken on request while the job hangs (issue 33 item 8).

Where the process has the recorder on (``TORCH_FR_BUFFER_SIZE`` or ``TORCH_NCCL_TRACE_BUFFER_SIZE``
above 0) and has imported torch.distributed, the probe makes a FIFO ``fr-<pid>.fifo`` in the run's
private folder and a daemon thread that waits on it, blocked in ``open`` (no polling, no cost).
Whoever writes a byte into it (collectors/flight_recorder.request_dumps) gets torch's own dump
(``torch._C._distributed_c10d._dump_fr_trace_json``) in ``fr-<pid>.json`` beside it, written whole
(a temporary file, then a rename). The training thread is never touched: the dump reads torch's
ring buffer from this thread, the way torch's NCCL watchdog does. Torch 2.9 writes no dump on a
gloo timeout itself, so this is how a gloo job's hang is seen. Any failure turns it off, silently.
"""

from __future__ import annotations

import os
import sys
import threading

from ._state import env_int

BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")  # neurondesk/core/node/flight_recorder.py's
ENV_VARS = (*BUFFER_VARS, "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_NCCL_DUMP_ON_TIMEOUT")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def flight_env() -> dict[str, str]:
    """This process's Flight Recorder variables, for the hello."""
    return {k: os.environ[k][:256] for k in ENV_VARS if k in os.environ}


def recorder_on() -> bool:
    for var in BUFFER_VARS:
        value = env_int(var)
        if value is not None and value > 0:
            return True
    return False


def start_dump_server(folder: str, pid: int) -> bool:
    """The FIFO and its thread, once per process; False where the recorder is off or torch has no dump."""
    try:
        if not recorder_on():
            return False
        c10d = sys.modules.get("torch._C._distributed_c10d")
        dump = getattr(c10d, "_dump_fr_trace_json", None)
        if dump is None:
            return False
        fifo = os.path.join(folder, f"fr-{pid}.fifo")
        try:
            os.unlink(fifo)  # a pid reused, or a reload: ours to replace
        except OSError:
            pass
        os.mkfifo(fifo, 0o600)
        threading.Thread(target=_serve, args=(fifo, os.path.join(folder, f"fr-{pid}.json"), dump),
                         name="neurondesk-probe-flight-recorder", daemon=True).start()
        return True
    except Exception:  # noqa: BLE001 - a nicety: never a reason for the program to fail
        return False


def _serve(fifo: str, out: str, dump) -> None:
    try:
        while True:
            fd = os.open(fifo, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))  # blocks until a request comes
            try:
                os.read(fd, 64)
            finally:
                os.close(fd)
            data = dump(includeCollectives=True)
            tmp = out + ".tmp"
            fd = os.open(tmp, _FLAGS, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data if isinstance(data, bytes) else str(data).encode())
            os.replace(tmp, out)
    except Exception:  # noqa: BLE001 - the folder went, torch refused: no more dumps, nothing said
        return
