"""The forward watch: the outermost module's calls give a step's samples, tokens and input shapes,
and tell training forwards from evaluation ones. Watched from the module's class, never from the
object (see adopt_top_module)."""

from __future__ import annotations

from time import perf_counter

from . import _state
from .shapes import SHAPES_KEEP, dims_of, holds_ids


class ForwardWatch:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.top_module = None  # weakref.ref to the outermost module, once its first call is seen
        self.watched: dict = {}  # id -> weakref.ref of the watched modules (the outermost, its wrappers)
        self.in_forward = False  # a watched forward is running: modules it calls are not counted
        self.seq_first = False  # the model takes (sequence, batch) inputs

    def patch_module(self, module) -> None:
        """The first module called is the outermost one: wrap Module._call_impl until that first
        call, then watch that module from its class (see adopt_top_module). No global module
        hook (torch.compile(module) warns about those: the script's output must stay its own), and
        Module.__call__ stays torch's own (torch.compile(module) captures it before any call)."""
        if self.top_module is not None:
            return  # a reload after the outermost module was found: its class goes on being watched
        cls = module.Module
        real_impl = cls._call_impl
        if getattr(real_impl, "_neurondesk", False):
            return
        probe, watch = self.probe, self

        def _call_impl(mod, *args, **kwargs):
            if _state.is_compiling() or cls.__dict__.get("_call_impl") is not _call_impl:
                return real_impl(mod, *args, **kwargs)
            cls._call_impl = real_impl  # one call only: from now on torch's own, untouched
            if not (probe.disabled or "forward" in probe.off or watch.top_module is not None):
                probe.guarded(watch.adopt_top_module, mod, hook="forward")
            return type(mod)._call_impl(mod, *args, **kwargs)  # the watch sees this first call too

        _call_impl._neurondesk = True
        cls._call_impl = _call_impl

    def adopt_top_module(self, mod) -> None:
        """Watch the outermost module's calls from its class, never from the object: no hook,
        attribute or bound method of ours on it (they would hold the probe's lock and socket), so
        the model deep-copies, pickles, saves and scripts exactly as without neurondesk. Watched
        modules are known by weak references; other instances of their classes (an EMA copy, a
        teacher) pass straight through, and a class pickles by name, so nothing of ours travels
        with it. A bare torch class as the outermost module (nn.Sequential, nn.Linear) is watched
        the same way: its other instances cost one identity test a call.

        What a wrapper holds is watched too, and what later wraps a watched module: Trainer and
        accelerate train through torch.compile's OptimizedModule (or DDP) but evaluate the module
        inside it, and a script may call its model once before compiling it. A forward counts only
        when no watched forward is running (DDP calling its module is one forward, not two)."""
        self.seq_first = self._sequence_first(mod)
        self._watch(mod)
        inner = mod
        for _ in range(4):
            inner = self._wrapped(inner)
            if inner is None:
                break
            self._watch(inner)

    @staticmethod
    def _wrapped(mod):
        """The module a wrapper holds: torch.compile's `_orig_mod`, DDP's / DataParallel's `module`."""
        subs = getattr(mod, "_modules", None)
        if not isinstance(subs, dict) or len(subs) != 1:
            return None
        inner = subs.get("_orig_mod") or subs.get("module")
        return inner if inner is not None and hasattr(type(inner), "_call_impl") else None

    @staticmethod
    def _sequence_first(mod) -> bool:
        """Whether the model takes (sequence, batch, ...) inputs: its recurrent / transformer /
        attention layers say batch_first=False, none says True (an LSTM language model's [35, 20]
        batch holds 20 samples, not 35). Looked at once."""
        firsts = set()
        for i, m in enumerate(mod.modules()):
            if i > 10000:
                break
            flag = getattr(m, "batch_first", None)
            if type(flag) is bool:
                firsts.add(flag)
        return firsts == {False}

    def _watch(self, mod) -> None:
        import weakref

        self.watched[id(mod)] = weakref.ref(mod)
        self.top_module = self.top_module or self.watched[id(mod)]
        self._watch_class(type(mod))

    def is_watched(self, mod) -> bool:
        ref = self.watched.get(id(mod))
        if ref is not None and ref() is mod:
            return True
        inner = self._wrapped(mod)  # a wrapper made after the first call (torch.compile, DDP)?
        if inner is None or not self.is_watched(inner):
            return False
        self._watch(mod)
        return True

    def _watch_class(self, cls) -> None:
        real = cls._call_impl  # torch's own (the first-call wrapper is gone), or the class's override
        if getattr(real, "_neurondesk", False):
            return  # this class is watched already
        probe, watch = self.probe, self
        tracing = self._jit_tracing_state()

        def _call_impl(m, *args, **kwargs):
            # _state.is_compiling() first: inside a compiled region dynamo folds it to True and
            # reads nothing else of ours (a read of watch.in_forward there would become a guard,
            # and each change of it a recompile)
            if _state.is_compiling() or watch.in_forward or probe.disabled or "forward" in probe.off:
                return real(m, *args, **kwargs)
            try:  # guarded inline: this runs at every call of a watched class's modules
                ours = tracing() is None and watch.is_watched(m)
            except Exception as exc:  # noqa: BLE001 - fail open: the watch alone turns off
                probe.hook_failed("forward", exc)
                ours = False
            if not ours:
                return real(m, *args, **kwargs)
            watch.top_forward(m, args, kwargs)
            watch.in_forward = True
            clock = probe.clock
            t0, inner0 = perf_counter(), clock.inner
            try:
                return real(m, *args, **kwargs)
            finally:
                watch.in_forward = False
                if not probe.phase.in_eval:  # a training forward: its host time, less syncs and collectives in it
                    clock.fwd += perf_counter() - t0 - (clock.inner - inner0)
                    clock.phased = True

        _call_impl._neurondesk = True
        _call_impl.__wrapped__ = real
        cls._call_impl = _call_impl

    @staticmethod
    def _jit_tracing_state():
        """torch.jit.trace runs forwards that are no training: the watch stays out of them."""
        import torch

        state = getattr(torch._C, "_get_tracing_state", None)
        return state if callable(state) else (lambda: None)

    def top_forward(self, mod, args, kwargs):
        """One forward of a watched module: the one entry of the class watch; never raises."""
        probe = self.probe
        if _state.is_compiling() or probe.disabled or "forward" in probe.off:
            return None
        probe.guarded(self._on_forward, mod, args, kwargs, hook="forward")
        return None

    def _on_forward(self, mod, args, kwargs) -> None:
        probe, clock, phase = self.probe, self.probe.clock, self.probe.phase
        clock.note_activity()
        x = kwargs.get("input_ids") if kwargs else None
        dims = dims_of(x) if x is not None else None
        if dims is None:
            for a in args:
                dims = dims_of(a)
                if dims is not None:
                    x = a
                    break
        batch_dim = 1 if self.seq_first and dims and len(dims) >= 2 else 0
        if phase.is_eval_forward(mod):
            phase.enter()
            phase.eval_batches += 1
            if dims:
                phase.eval_samples += dims[batch_dim]
                phase.eval_tokens += dims[0] * dims[1] if len(dims) >= 2 and holds_ids(x) else 0
                phase.eval_dims = dims
            return
        phase.leave()
        if clock.backward_pending and clock.manual_steps():
            clock.end_manual_step(mod)  # no optimizer: a backward, then the next forward, is a step
        if clock.batch_at is not None:  # from the batch to its forward: the copy to the device (h2d)
            clock.h2d += max(0.0, perf_counter() - clock.batch_at)
            clock.batch_at = None
        clock.forwards_since_step += 1
        if not dims:
            return
        clock.samples += dims[batch_dim]
        if len(dims) >= 2 and holds_ids(x):
            clock.tokens += dims[0] * dims[1]
        else:
            clock.tokens_known = False
        if len(clock.shapes) < SHAPES_KEEP:  # bounded: a loop with no step boundary adds none past it
            clock.shapes.append(dims)
        clock.train_dims = dims
        devices = probe.devices
        if devices.autocast is None:
            try:
                device_type = x.device.type
            except Exception:  # noqa: BLE001 - not a torch tensor (numpy's .device is a str)
                device_type = None
            if isinstance(device_type, str):
                devices.autocast = devices.autocast_state(device_type)
