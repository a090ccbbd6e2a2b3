"""Data loading: the time the training thread waits for a batch (DataLoader's iterator,
torch_xla's PerDeviceLoader under MpDeviceLoader), and a batch's samples and tokens for the
steps whose forward the watch could not see."""

from __future__ import annotations

import threading
import time

from .callthrough import CallThrough
from .shapes import SHAPES_KEEP, dims_of, holds_ids


class LoaderHooks:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.in_loader = False  # inside PerDeviceLoader.next: its sync is the loader's
        self.sync_time_in_loader = 0.0

    def patch_dataloader(self, module) -> None:
        cls = module._BaseDataLoaderIter
        real_next = cls.__next__
        probe, hooks = self.probe, self

        if getattr(real_next, "_neurondesk", False):
            return  # already ours (the same class patched again)

        def __next__(it):
            if probe.disabled or "dataloader" in probe.off or threading.get_ident() != probe.train_thread:
                return real_next(it)
            t0 = time.perf_counter()
            try:
                batch = real_next(it)
            finally:
                probe.guarded(hooks.note_wait, t0, hook="dataloader")
            probe.guarded(hooks.note_batch, batch, hook="dataloader")
            return batch

        __next__.__doc__, __next__.__wrapped__, __next__._neurondesk = real_next.__doc__, real_next, True
        cls.__next__ = __next__
        real_init = cls.__init__

        def __init__(it, *args, **kwargs):
            real_init(it, *args, **kwargs)
            if probe.phase.in_eval and not probe.disabled and threading.get_ident() == probe.train_thread:
                probe.guarded(probe.phase.new_pass, hook="dataloader")

        __init__.__doc__, __init__.__wrapped__, __init__._neurondesk = real_init.__doc__, real_init, True
        cls.__init__ = __init__

    def note_wait(self, t0: float) -> None:
        phase, clock = self.probe.phase, self.probe.clock
        if phase.in_eval:
            phase.eval_wait += time.perf_counter() - t0
            return
        if clock.step_start is None:
            clock.step_start, clock.step_start_wall = t0, time.time()
        now = time.perf_counter()
        clock.data_wait += now - t0
        clock.batch_at = now  # the forward that takes it says how long it took to get there (h2d)

    def note_batch(self, batch) -> None:
        """Samples and tokens from a DataLoader batch: used for the steps in which the model's
        forward could not be seen (a forward inside a torch.compile'd function). A batch of
        anything (numpy arrays, strings, the user's own objects) is read without raising."""
        x = batch
        for _ in range(3):
            if isinstance(x, dict):
                x = x.get("input_ids", next(iter(x.values()), None))
            elif isinstance(x, (list, tuple)):
                x = x[0] if x else None
            else:
                break
        dims = dims_of(x)
        if not dims:
            return
        clock = self.probe.clock
        clock.loader_samples += dims[0]
        if len(dims) >= 2 and holds_ids(x):
            clock.loader_tokens += dims[0] * dims[1]
        if len(clock.loader_shapes) < SHAPES_KEEP:
            clock.loader_shapes.append(dims)

    def patch_parallel_loader(self, module) -> None:
        cls = module.PerDeviceLoader
        real_next = cls.next
        probe, hooks = self.probe, self

        if getattr(real_next, "_neurondesk", False):
            return

        # torch_xla's own __next__ (kept: its frame is in torch_xla's report) calls self.next():
        # no frame of ours while it syncs (callthrough.py)
        cls.next = CallThrough(real_next, hooks.begin_next, hooks.end_next)
        real_init = cls.__init__

        def __init__(loader, *args, **kwargs):
            # MpDeviceLoader's iter() makes one per pass, on the training thread (the DataLoader
            # itself is iterated on the loader's own thread): a new pass, as with a DataLoader
            real_init(loader, *args, **kwargs)
            if probe.phase.in_eval and not probe.disabled and threading.get_ident() == probe.train_thread:
                probe.guarded(probe.phase.new_pass, hook="parallel-loader")

        __init__.__doc__, __init__.__wrapped__, __init__._neurondesk = real_init.__doc__, real_init, True
        cls.__init__ = __init__

    def begin_next(self) -> float | None:
        """PerDeviceLoader.next begins: its start, or None (not ours to time)."""
        if self.probe.disabled or "parallel-loader" in self.probe.off:
            return None
        self.in_loader, self.sync_time_in_loader = True, 0.0
        return time.perf_counter()

    def end_next(self, t0: float | None) -> None:
        if t0 is not None:
            self.in_loader = False
            self.probe.guarded(self.note_loader_wait, t0, hook="parallel-loader")

    def note_loader_wait(self, t0: float) -> None:
        phase, clock = self.probe.phase, self.probe.clock
        if clock.step_start is None:
            clock.step_start, clock.step_start_wall = t0, time.time()
        # The loader syncs (ending the previous step) and then waits for a batch.
        wait = max(0.0, time.perf_counter() - t0 - self.sync_time_in_loader)
        if phase.in_eval:
            phase.eval_wait += wait
        else:
            clock.data_wait += wait
