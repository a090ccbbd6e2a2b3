"""What the probes left in the run's private folder (the probe's lifelines.py writes them): each
process's own count of the steps it ended, kept in shared memory that outlives the process.
Read at the workload's exit, after its last probe messages: a process that died abruptly (SIGKILL,
os._exit, a segfault) with steps still in its batch has a count above what was received.

steps-<pid>.count: 16 bytes, b"ndsteps1" then a native-endian uint64.
"""

from __future__ import annotations

import os
import re
import struct

COUNT_MAGIC = b"ndsteps1"
_COUNT_FILE = re.compile(r"steps-(\d{1,10})\.count")
_LAYOUT = struct.Struct("=8sQ")


def read_step_counts(folder: str) -> dict[int, int]:
    """pid -> steps that process's probe ended, for every readable count file in ``folder``.
    Never raises; a file that is not one (wrong size, wrong magic, a symlink) is left out."""
    counts: dict[int, int] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return counts
    for name in names:
        m = _COUNT_FILE.fullmatch(name)
        if m is None:
            continue
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                data = os.read(fd, _LAYOUT.size + 1)
            finally:
                os.close(fd)
        except OSError:
            continue
        if len(data) == _LAYOUT.size:
            magic, steps = _LAYOUT.unpack(data)
            if magic == COUNT_MAGIC:
                counts[int(m.group(1))] = steps
    return counts


def death_signal(exit_code: int | None) -> str | None:
    """The signal a process died of, by its wait status as subprocess gives it (-11: "SIGSEGV"),
    or None when it exited."""
    if exit_code is None or exit_code >= 0:
        return None
    import signal

    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"
