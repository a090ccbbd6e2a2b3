"""XLA value reads: the Tensor methods that read a value back to the host (.item(), print, if t:)
run the pending graph. Each one that did is a `graph_executed` (trigger value-access), its
compiles reported where the user's code read the value.

The methods are not wrapped by a function of ours (its frame would sit on top of every value
read's stack, and torch_xla's own PT_XLA_DEBUG report would name it as the frame that ran the
graph). Each is a descriptor instead: looking the method up on an XLA tensor takes torch_xla's
counters and hands back torch's own method bound to the tensor; the read is counted when that
bound method is released, right after the call returns. While torch runs the graph no frame of
ours is on the stack, and a tensor of any other device costs one attribute check."""

from __future__ import annotations

import threading
import weakref

from . import _state, frames


class _Read:
    """One value-reading method of the Tensor class: torch's own (``raw``), begun on XLA tensors."""

    __slots__ = ("raw", "bind", "reads")

    def __init__(self, raw, reads: ValueReads) -> None:
        self.raw, self.bind, self.reads = raw, raw.__get__, reads

    def __get__(self, obj, cls=None):
        try:  # the path of every read of every tensor: one check, then torch's own method
            if obj is None or not (obj.is_xla or self.reads.every_device):
                return self.bind(obj, cls)
        except Exception:  # noqa: BLE001 - a tensor whose device cannot be read is not ours to count
            return self.bind(obj, cls)
        bound = self.bind(obj, cls)
        self.reads.probe.guarded(self.reads.begin, bound, hook="value-access")
        return bound


class ValueReads:
    NAMES = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__",
             "__repr__", "__format__")

    def __init__(self, probe) -> None:
        self.probe = probe
        self.local = threading.local()  # .pending: (the bound method's weakref, counts before) of this thread
        self.every_device = False  # only XLA tensors' reads run a graph to count (a test counts CPU ones)

    def patch_value_reads(self, tensor_cls=None) -> None:
        """Put a descriptor in place of each value-reading Tensor method. Whatever fails in the
        counting turns the value-access hook off; the user's call is torch's own, untouched."""
        if tensor_cls is None:
            import torch

            tensor_cls = torch.Tensor
        for name in self.NAMES:
            raw = next((k.__dict__[name] for k in tensor_cls.__mro__ if name in k.__dict__), None)
            if raw is None or isinstance(raw, _Read) or not hasattr(raw, "__get__"):
                continue
            setattr(tensor_cls, name, _Read(raw, self))

    def begin(self, bound) -> None:
        probe, xla, local = self.probe, self.probe.xla, self.local
        # inside a sync (a step closure reading .item()) the sync counts the graphs; a read inside
        # a read (torch's __format__ calls .item()) is the outer one's
        if (_state.is_compiling() or probe.disabled or "value-access" in probe.off or xla.sync_depth
                or getattr(local, "pending", None) is not None):
            return
        before = probe.guarded(self.read_begin, hook="value-access")
        if before is None:
            return
        local.pending = (weakref.ref(bound, self._released), before)

    def _released(self, ref) -> None:
        try:
            pending = getattr(self.local, "pending", None)
            if pending is not None and pending[0] is ref:
                self.settle()
        except BaseException as exc:  # noqa: BLE001 - a weakref callback: CPython would print and drop it
            if not isinstance(exc, Exception):  # a signal's (Ctrl-C) while it ran: the workload's, not ours
                _state.redeliver(exc)

    def settle(self) -> None:
        """The pending read of this thread is over (its method was called and released, or a sync
        begins while a stored bound method is still held): its graphs are counted now."""
        pending = getattr(self.local, "pending", None)
        if pending is None:
            return
        self.local.pending = None
        self.probe.xla.sync_started = None
        self.probe.guarded(self.read_done, pending[1], hook="value-access")

    def read_begin(self) -> tuple[int, int]:
        """A value read syncs too: the compile watcher announces a long compile in it."""
        xla = self.probe.xla
        counts = xla.counts()
        xla.catch_up(counts)
        xla.start_watch(counts)
        return counts

    def read_done(self, before) -> None:
        xla = self.probe.xla
        after = xla.counts()
        xla.compiles_seen = max(xla.compiles_seen, after[0])
        if after != before:
            self.value_access(before, after)

    def value_access(self, before, after) -> None:
        probe, clock, phase = self.probe, self.probe.clock, self.probe.phase
        compiles = after[0] - before[0]
        execs = compiles + after[1] - before[1]
        location = frames.user_location()
        if compiles:
            probe.xla.report_compiles(compiles, "value-access")
        if phase.in_eval:
            phase.eval_execs += execs
            return
        clock.step_execs += execs
        library, called_from = frames.library_frames()
        probe.send({"kind": "graph_executed", "step": clock.step, "trigger": "value-access",
                    "location": location, "executions": execs, "compiles": compiles,
                    "library": library, "called_from": called_from})
