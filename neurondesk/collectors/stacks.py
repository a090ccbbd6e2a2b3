"""Every thread's Python stack of a live workload process, on request.

The probe registers ``faulthandler.register(SIGUSR2, file=<private>/stacks-<pid>.txt,
all_threads=True, chain=False)`` in each process it runs in, unless the program has a SIGUSR2
handler of its own (lifelines.py in the probe). ``request_stacks`` signals the process and reads
what the dump appended to that file. Stdlib only; imports nothing of the probe.
"""

from __future__ import annotations

import os
import signal
import time

POLL_S = 0.02
QUIET_S = 0.1  # the dump is complete when the file has stopped growing this long


def stacks_path(private_dir: str, pid: int) -> str:
    return os.path.join(private_dir, f"stacks-{pid}.txt")


def request_stacks(pid: int, private_dir: str, timeout: float = 2.0) -> str | None:
    """Send SIGUSR2 to ``pid`` and return the stack dump it appends to stacks-<pid>.txt in
    ``private_dir`` (the run's private folder, the probe socket's), or None: no such file (no
    probe there, or the program handles SIGUSR2 itself: then no signal is sent, since without
    our handler its default action would end the process), no such process, or no dump within
    ``timeout`` seconds."""
    path = stacks_path(private_dir, pid)
    try:
        before = _size(path)
        if before is None:
            return None
        os.kill(pid, signal.SIGUSR2)
    except OSError:
        return None
    deadline = time.monotonic() + timeout
    size, changed = before, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        now_size = _size(path)
        if now_size is None:
            return None
        if now_size != size:
            size, changed = now_size, time.monotonic()
        elif size > before and time.monotonic() - changed >= QUIET_S:
            break
    if size <= before:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.lseek(fd, before, os.SEEK_SET)
            data = os.read(fd, size - before)
        finally:
            os.close(fd)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _size(path: str) -> int | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    import stat

    return st.st_size if stat.S_ISREG(st.st_mode) else None
