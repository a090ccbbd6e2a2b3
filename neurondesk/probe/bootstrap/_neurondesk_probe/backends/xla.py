"""torch_xla: every sync (torch_xla.sync, which mark_step, MpDeviceLoader and torch_xla.compile all
go through) is a possible step boundary; torch_xla's own counters say what compiled and ran in it.
A watcher thread announces a long compile while it runs. Value reads are in values.py."""

from __future__ import annotations

import os
import sys
import threading
import time

from .. import frames
from ..callthrough import CallThrough


class XlaHooks:
    NAME = "xla"
    PATCHES = (("torch_xla", "patch_torch_xla", "xla-sync"),)

    def __init__(self, probe) -> None:
        self.probe = probe
        self.xlac = None
        self.xlac_seen: bool | None = None  # torch_xla patched once already (its watcher thread runs)
        self.sync_depth = 0
        self.compiles_seen = 0  # torch_xla's UncachedCompile count as of the last sync or value read we saw
        self.sync_started: float | None = None
        self.sync_compiles_at_start = 0
        self.compile_announced = False
        self.compile_samples_seen = 0
        self.debug_file: str | None = None
        self.debug_offset = 0
        # The launcher asks for PT_XLA_DEBUG_LEVEL=1 only when the user did not set it. Each
        # process writes its compile analysis to its own file, read back right after a compile.
        if os.environ.get("NEURONDESK_PTXLA_DEBUG") == "1":
            folder = os.path.dirname(probe.socket_path)
            self.debug_file = os.path.join(folder, f"ptxla-{probe.pid}.log")
            os.environ["PT_XLA_DEBUG_FILE"] = self.debug_file

    def read_debug_text(self) -> str | None:
        if not self.debug_file:
            return None
        try:
            with open(self.debug_file, "rb") as f:
                f.seek(self.debug_offset)
                data = f.read(1 << 20)
            self.debug_offset += len(data)
            return data.decode("utf-8", "replace")
        except OSError:
            return None

    def patch_torch_xla(self, module) -> None:
        # Hook torch_xla.sync *above* the real one, so torch_xla's own debug analysis still finds
        # its `sync` frame on top of the stack and names the cause correctly; and with no frame of
        # ours on the stack while it runs (callthrough.CallThrough): the user's torch_xla.sync(),
        # MpDeviceLoader's and xm.mark_step's, torch_xla.compile's sync() by its global name.
        self.xlac = module._XLAC
        inner = sys.modules.get("torch_xla.torch_xla")
        real_sync = module.sync
        probe, hooks = self.probe, self
        first = self.xlac_seen is None
        self.xlac_seen = True
        if getattr(real_sync, "_neurondesk", False):
            return
        sync = CallThrough(real_sync, hooks.begin_call, hooks.end_call)
        module.sync = sync
        if inner is not None and getattr(inner, "sync", None) is real_sync:
            inner.sync = sync
        probe.guarded(probe.values.patch_value_reads, hook="value-access")
        if first:
            threading.Thread(target=self._compile_watcher, name="neurondesk-probe", daemon=True).start()

    def begin_call(self):
        """A call of torch_xla.sync begins: the counts before it, or None (not ours to count)."""
        probe = self.probe
        if probe.disabled or self.sync_depth or "xla-sync" in probe.off:
            return None
        return probe.guarded(self.sync_begin, hook="xla-sync")

    def end_call(self, before) -> None:
        if before is not None:
            self.probe.guarded(self.sync_end, before, hook="xla-sync")

    def counts(self) -> tuple[int, int]:
        cv = self.xlac._xla_counter_value
        return (cv("UncachedCompile") or 0), (cv("CachedCompile") or 0)

    def catch_up(self, counts: tuple[int, int]) -> None:
        """Compiles torch_xla counted outside any sync or value read we saw (xm.mesh_reduce and
        collectives sync through _xla_sync_multi directly): counted now, so that compiles always
        equal torch_xla's, without a line (none is known)."""
        if counts[0] > self.compiles_seen:
            n, self.compiles_seen = counts[0] - self.compiles_seen, counts[0]
            self.report_compiles(n, "outside-sync", located=False)

    def start_watch(self, counts: tuple[int, int]) -> None:
        """A sync or value read begins: the compile watcher may announce a long compile in it."""
        self.sync_compiles_at_start = counts[0]
        self.compile_announced = False
        self.sync_started = time.perf_counter()

    def sync_begin(self):
        self.probe.values.settle()  # a value read whose bound method is still held ends here
        clock = self.probe.clock
        clock.note_activity()
        clock.mark_presync()
        counts = self.counts()
        self.catch_up(counts)
        # Only once nothing here can fail: a sync_begin that raised gets no sync_end, and a depth
        # left at 1 would silently turn the value-access hook off too.
        self.sync_depth += 1
        self.start_watch(counts)
        return counts

    def sync_end(self, before) -> None:
        probe, clock, phase, loader = self.probe, self.probe.clock, self.probe.phase, self.probe.loader
        self.sync_depth -= 1
        elapsed = time.perf_counter() - self.sync_started
        self.sync_started = None
        if loader.in_loader:
            loader.sync_time_in_loader += elapsed
        after = self.counts()
        self.compiles_seen = max(self.compiles_seen, after[0])
        compiles = after[0] - before[0]
        execs = compiles + after[1] - before[1]
        clock.is_xla = True
        devices = probe.devices
        if execs and not (devices.device_reported or devices.xla_device_reported) and not clock.has_optimizer:
            # an inference loop: no optimizer will tell us the device. Guarded on its own, as the
            # optimizer's report is: a device that cannot be named must not end the XLA steps.
            probe.guarded(devices.report_xla_device, hook="device")
        # Training: the first sync after an optimizer step ends the step. With no optimizer at
        # all (inference, tracing) a sync that runs a graph after a forward is a step; one with
        # neither a forward nor an optimizer step since the last (a setup broadcast) is not.
        boundary = clock.opt_stepped or (not clock.has_optimizer and clock.forwards_since_step > 0)
        trigger = "loader" if loader.in_loader else "sync"
        if not phase.in_eval or clock.opt_stepped:  # the step's wait at the device (its sync phase)
            clock.sync += elapsed
            clock.inner += elapsed
            clock.phased = True
        if phase.in_eval and not clock.opt_stepped:  # an evaluation batch: its graphs are not the step's
            phase.eval_execs += execs
            if compiles:
                self.report_compiles(compiles, trigger)
            return
        clock.step_execs += execs
        if compiles:
            self.report_compiles(compiles, trigger)
        if boundary:
            if execs or clock.opt_stepped:
                clock.end_step()
        elif execs:
            library, called_from = frames.library_frames()
            probe.send({"kind": "graph_executed", "step": clock.step, "trigger": trigger,
                        "location": frames.user_location(), "executions": execs, "compiles": compiles,
                        "library": library, "called_from": called_from})

    def report_compiles(self, n: int, trigger: str, located: bool = True) -> None:
        probe, phase = self.probe, self.probe.phase
        phase.count_compiles(n)
        durations: list[float | None] = [None] * n
        data = self.xlac._xla_metric_data("CompileTime")
        if data:
            total, samples = data[0], data[2]
            new = total - self.compile_samples_seen
            self.compile_samples_seen = total
            values = [v / 1e9 for _, v in samples[-new:]] if new > 0 else []
            durations = (values + durations)[:n] if len(values) < n else values[-n:]
        location = frames.user_location() if located else None
        library = frames.library_location() if located else None
        point = f"{trigger}@{frames.sync_point()}" if located else trigger
        debug_text = self.read_debug_text()
        for i, d in enumerate(durations):
            probe.send({"kind": "compile", "source": "probe", "step": probe.clock.step, "duration_s": d,
                        "cache": "miss", "trigger": trigger, "point": point, "phase": phase.name,
                        "location": location, "library": library, "input_shapes": phase.shapes(),
                        "debug_text": debug_text if i == 0 else None})

    def _compile_watcher(self) -> None:
        # The compiler releases the GIL; this thread sees the compile counter move during a
        # long sync and announces the compile so the console can run a live wall timer.
        probe = self.probe
        while not probe.disabled:
            time.sleep(0.25)
            started = self.sync_started
            if started is None or self.compile_announced or time.perf_counter() - started < 0.5:
                continue
            try:
                if (self.xlac._xla_counter_value("UncachedCompile") or 0) > self.sync_compiles_at_start:
                    self.compile_announced = True
                    probe.send({"kind": "compile_started", "source": "probe", "step": probe.clock.step})
            except Exception:  # noqa: BLE001
                return
