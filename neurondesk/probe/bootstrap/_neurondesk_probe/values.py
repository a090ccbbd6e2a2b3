"""XLA value reads: the Tensor methods that read a value back to the host (.item(), print, if t:)
run the pending graph. Each one that did is a `graph_executed` (trigger value-access), its
compiles reported where the user's code read the value."""

from __future__ import annotations

import threading

from . import _state, frames


class ValueReads:
    NAMES = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__",
             "__repr__", "__format__")

    def __init__(self, probe) -> None:
        self.probe = probe
        self.guard = threading.local()

    def patch_value_reads(self, tensor_cls=None) -> None:
        """Wrap the value-reading Tensor methods. The counting around the real call is guarded
        like every hook: whatever fails there turns the value-access hook off, and the user's
        call returns (or raises) exactly as without us."""
        if tensor_cls is None:
            import torch

            tensor_cls = torch.Tensor
        probe, reads, xla = self.probe, self, self.probe.xla
        for name in self.NAMES:
            real = getattr(tensor_cls, name, None)
            if real is None or getattr(real, "_neurondesk", False):
                continue

            def make(real=real, name=name):
                def wrapper(self, *args, **kwargs):
                    guard = reads.guard
                    # inside a sync (a step closure reading .item()) the sync counts the graphs
                    if (_state.is_compiling() or probe.disabled or "value-access" in probe.off
                            or xla.sync_depth or getattr(guard, "on", False)):
                        return real(self, *args, **kwargs)
                    guard.on = True
                    try:
                        before = probe.guarded(reads.read_begin, hook="value-access")
                        result = real(self, *args, **kwargs)
                        if before is not None:
                            probe.guarded(reads.read_done, before, hook="value-access")
                        return result
                    finally:
                        guard.on = False
                        xla.sync_started = None

                wrapper.__name__ = name
                wrapper.__qualname__ = f"Tensor.{name}"
                wrapper.__doc__ = getattr(real, "__doc__", None)
                wrapper._neurondesk = True
                return wrapper

            setattr(tensor_cls, name, make())

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
        probe.send({"kind": "graph_executed", "step": clock.step, "trigger": "value-access",
                    "location": location, "executions": execs, "compiles": compiles})
