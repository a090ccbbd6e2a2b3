"""torch.distributed's collectives called from Python (all_reduce, barrier, broadcast ...): the
time the training thread spends in them is the step's collective phase. DDP's gradient
all-reduce runs in its C++ reducer, overlapped with the backward; the part of it the backward
waits for after its own compute (a slower peer, a slow network) is moved from the backward to the
collective phase, from DDP's own timing of it (`DdpWait`). Where Flight Recorder is on, the
module's import also starts its dump on request (flight.py).

A call that took LONG_S or more is also sent as its own ``long_collective`` message (its op, end and
duration): a rank waiting in a barrier for another rank's checkpoint save is one, and the recorder
counts that wait (core/reduce/checkpoints.py). At most LONG_PER_S of them a second (a job whose every
all-reduce is slow sends no flood); none for a call inside a checkpoint call (DCP's own: the save's time)."""

from __future__ import annotations

import threading
from time import perf_counter, time

from . import _state
from .flight import start_dump_server

NAMES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_to_all",
         "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "gather", "reduce",
         "reduce_scatter", "reduce_scatter_tensor", "scatter", "monitored_barrier")
LONG_S = 0.020  # a call at least this long is sent on its own (long_collective)
LONG_PER_S = 20  # ... at most this many a second


class DdpWait:
    """How long a DDP backward waits for its gradient all-reduce after its own compute is done:
    DDP's own timing (its logging data: the all-reduce's span less the part overlapped with the
    backward's compute), which DDP takes at its first 10 iterations and every 100th. Read from the
    watched DDP module, never written: at its first backwards, then every REREAD_EVERY (a read
    builds DDP's whole logging dict, about 10 us); each backward takes the latest."""

    REREAD_EVERY = 20

    def __init__(self) -> None:
        self.module = None  # weakref.ref to the watched DDP module
        self.backwards = 0  # synced backwards since it was watched
        self.wait_s = 0.0  # the latest sample's wait

    def watch(self, mod) -> None:
        import weakref

        if callable(getattr(type(mod), "_get_ddp_logging_data", None)):
            self.module, self.backwards, self.wait_s = weakref.ref(mod), 0, 0.0

    def in_backward(self, backward_s: float) -> float:
        """The seconds of this backward spent waiting in DDP's all-reduce (0 when unknown)."""
        mod = self.module() if self.module is not None else None
        # DDP sets require_forward_param_sync at each forward: False when it prepared no all-reduce
        # for this backward (no_sync(): gradient accumulation), whose backward waits for nothing
        if mod is None or getattr(mod, "require_forward_param_sync", True) is False:
            return 0.0
        self.backwards += 1
        if self.backwards <= 12 or self.backwards % self.REREAD_EVERY == 0:
            data = mod._get_ddp_logging_data()
            comm, overlap = data.get("backward_comm_time"), data.get("backward_compute_comm_overlap_time")
            ok = type(comm) is int and type(overlap) is int
            self.wait_s = max(0.0, (comm - overlap) / 1e9) if ok else 0.0
        return min(self.wait_s, backward_s)


class CollectiveHooks:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.dump_server = False
        self.ddp = DdpWait()
        # collectives running on the training thread: one made inside another (all_gather_object's
        # all_gather, broadcast_object_list's broadcast) is in the outer one's time, never counted twice
        self.depth = 0
        self.long_second = 0  # the wall second of the last long call sent, and how many were sent in it
        self.long_sent = 0
        self.rank = _state.env_int("RANK")

    def patch_c10d(self, module) -> None:
        """Wraps each function in torch.distributed.distributed_c10d right after it ran, so that
        torch.distributed's own star import takes the wrapped ones."""
        for name in NAMES:
            real = getattr(module, name, None)
            if callable(real) and not getattr(real, "_neurondesk", False):
                setattr(module, name, self._wrap(real, name))
        if not self.dump_server:  # where Flight Recorder is on: its dump on request (flight.py)
            self.dump_server = start_dump_server(self.probe.private_dir, self.probe.pid)

    def _wrap(self, real, name: str):
        probe, hooks = self.probe, self

        def collective(*args, **kwargs):
            if (hooks.depth or _state.is_compiling() or probe.disabled or "collective" in probe.off
                    or threading.get_ident() != probe.train_thread):
                return real(*args, **kwargs)
            t0 = perf_counter()
            hooks.depth += 1
            try:
                return real(*args, **kwargs)
            finally:
                hooks.depth -= 1
                clock = probe.clock
                took = perf_counter() - t0
                if not probe.phase.in_eval:
                    clock.coll += took
                    clock.inner += took
                    clock.phased = True
                if took >= LONG_S:
                    probe.guarded(hooks.long_call, name, took, clock.step, hook="long_collective")

        return _state.dressed(collective, real)

    def long_call(self, op: str, took: float, step: int) -> None:
        """A call of LONG_S or more has just returned: its message, within LONG_PER_S a second, unless
        it was made inside a checkpoint call of this thread (the save's own time)."""
        if getattr(self.probe.checkpoints.local, "depth", 0):
            return
        now = time()
        second = int(now)
        if second != self.long_second:
            self.long_second, self.long_sent = second, 0
        if self.long_sent >= LONG_PER_S:
            return
        self.long_sent += 1
        self.probe.send({"kind": "long_collective", "t": now, "op": op, "duration_s": took, "step": step,
                         "rank": self.rank})
