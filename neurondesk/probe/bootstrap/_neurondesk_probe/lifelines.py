"""What the recorder can read of this process even if it dies without a word (SIGKILL, os._exit,
a segfault), through files in the run's private folder (the socket's), never through the
workload's streams:

  steps-<pid>.count  the probe's own count of steps ended, in shared memory (a 16-byte file
                     mapped MAP_SHARED: b"ndsteps1", then a native-endian uint64), stored at every
                     step. The kernel keeps the page whatever becomes of the process, so the
                     recorder compares it, at the workload's exit, with the steps it received, and
                     says the gap (steps the last batch held when the process died).
  stacks-<pid>.txt   every thread's Python stack, appended by faulthandler when the process gets
                     SIGUSR2 (registered only where the program has no SIGUSR2 handler of its
                     own); read by neurondesk.collectors.stacks.request_stacks.

Each is set up once; any failure leaves it off and the program as it was.
"""

from __future__ import annotations

import mmap
import os

COUNT_MAGIC = b"ndsteps1"
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class StepCount:
    """steps-<pid>.count, made at the first step (a process that never steps leaves none)."""

    def __init__(self, probe) -> None:
        self.probe = probe
        self.view = None  # None: not made yet; False: could not be made

    def store(self, steps: int) -> None:
        view = self.view
        if view is None:
            view = self.view = step_counter(self.probe.private_dir, self.probe.pid) or False
        if view:
            view[1] = steps


def step_counter(folder: str, pid: int):
    """A one-slot uint64 view over steps-<pid>.count (slot 1 is the count), or None."""
    try:
        fd = os.open(os.path.join(folder, f"steps-{pid}.count"), _FLAGS, 0o600)
        try:
            # Written, not only sized: the page has its disk block now, so storing into the mapping
            # later can never fault for want of space (a full disk must not SIGBUS the workload).
            if os.write(fd, COUNT_MAGIC + bytes(8)) != 16:
                return None
            mm = mmap.mmap(fd, 16)
        finally:
            os.close(fd)
        return memoryview(mm).cast("Q")
    except (OSError, ValueError, TypeError):
        return None


def register_stack_dump(folder: str, pid: int):
    """faulthandler dumps every thread's stack into stacks-<pid>.txt on SIGUSR2, without ending
    or pausing the program for longer than the dump (chain=False: nothing else runs for it).
    Only when SIGUSR2 has no handler of the program's (its default action would end the
    process). Returns the open file (faulthandler writes to its descriptor), or None."""
    try:
        import faulthandler
        import signal

        sig = getattr(signal, "SIGUSR2", None)
        if sig is None or not hasattr(faulthandler, "register") or signal.getsignal(sig) is not signal.SIG_DFL:
            return None
        fd = os.open(os.path.join(folder, f"stacks-{pid}.txt"),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
        f = os.fdopen(fd, "w")
        faulthandler.register(sig, file=f, all_threads=True, chain=False)
        _forget_when_taken(signal, sig, os.path.join(folder, f"stacks-{pid}.txt"))
        return f
    except Exception:  # noqa: BLE001 - a nicety: never a reason for the program to fail
        return None


def _forget_when_taken(signal, sig, path: str) -> None:
    """The program sets a SIGUSR2 handler of its own later (a job scheduler's requeue signal):
    the stacks file goes, so that nobody sends SIGUSR2 for a dump that would run its handler."""
    real = signal.signal
    if getattr(real, "_neurondesk", False):
        return

    def signal_(signalnum, handler):
        if signalnum == sig:
            try:
                os.unlink(path)
            except OSError:
                pass
        return real(signalnum, handler)

    signal_.__doc__, signal_.__wrapped__, signal_._neurondesk = real.__doc__, real, True
    signal.signal = signal_
