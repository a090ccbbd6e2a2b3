"""Checkpoint saves and loads, as the probe saw them (probe/bootstrap/_neurondesk_probe/checkpoints.py):
torch.save / torch.load, torch.distributed.checkpoint's save, async_save and load, Lightning's and
transformers' Trainer checkpoints; and the long torch.distributed calls (probe collective.py) that
tell the other ranks' wait for a save. Listed in core/events/registry.py; reduced by
core/reduce/checkpoints.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from neurondesk.core.events.run_events import Event

CHECKPOINT_OPS = ("save", "load", "async_done")


@dataclass(frozen=True)
class CheckpointOp(Event):
    """One outer checkpoint call of one process, sent when it returned (``t``: its end). The calls
    it made inside (a Trainer checkpoint's torch.save, DCP's writer threads) are in its time, never
    sent on their own."""

    kind: ClassVar[str] = "checkpoint"
    pid: int
    op: str  # "save" | "load" | "async_done" (an async save's background write ended: its time from the call)
    api: str  # "torch.save", "dcp.async_save", "lightning.Trainer.save_checkpoint" ...
    duration_s: float  # from the call to its return (async_done: to the end of the background write)
    step: int | None = None  # the probe's step count when it was called (steps ended before it)
    rank: int | None = None
    bytes: int | None = None  # on disk after it (a file's size, this rank's DCP files); None: no path given
    ok: bool = True
    error: str | None = None  # "OSError: [Errno 28] No space left on device" when it raised (the user's error)
    pending: bool = False  # an async save that returned with its write still running (its async_done follows)

    @property
    def start_t(self) -> float:
        return self.t - max(0.0, self.duration_s)


@dataclass(frozen=True)
class LongCollective(Event):
    """One torch.distributed call on a process's training thread that took at least the probe's
    threshold (collective.py LONG_S, 20 ms), sent when it returned (``t``: its end). A rank waiting in
    a barrier or an all-reduce for another rank's checkpoint save is one; the checkpoint reducer
    counts its part from the save's start as the wait for it. Calls made inside a checkpoint call
    (DCP's own) are in the save's time, never sent."""

    kind: ClassVar[str] = "long_collective"
    pid: int
    op: str  # "barrier", "all_reduce" ...
    duration_s: float  # from the call to its return
    step: int | None = None  # the probe's step count when it was called
    rank: int | None = None

    @property
    def start_t(self) -> float:
        return self.t - max(0.0, self.duration_s)
