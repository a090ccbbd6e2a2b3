"""The forward watch: the outermost module's calls give a step's samples, tokens and input shapes,
and tell training forwards from evaluation ones. Watched from the module's class, never from the
object (see adopt_top_module)."""

from __future__ import annotations

from threading import get_ident
from time import perf_counter

from . import _state
from .callthrough import hooked_call_impl, hooked_code
from .forward_facts import ForwardFacts


class ForwardWatch:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.facts = ForwardFacts(probe)
        self.top_module = None  # weakref.ref to the outermost module, once its first call is seen
        self.watched: dict = {}  # id -> weakref.ref of the watched modules (the outermost, its wrappers)
        self.in_forward = False  # a watched forward is running: modules it calls are not counted
        # per thread (DataParallel calls replicas from threads): one entry per hooked module call in
        # progress, its state or None (not ours); torch pairs each pre with its post in one thread
        self.calls: dict[int, list] = {}
        self.module_cls = self.torch_call_impl = None  # torch's Module and its own _call_impl
        self.call_impl = None  # the same, rebuilt with our two hooks (callthrough.hooked_call_impl)
        self._tracing = lambda: None  # torch.jit's tracing state, looked up at the first class watched

    def patch_module(self, module) -> None:
        """The first module called is the outermost one: Module._call_impl is torch's own code with
        our two hooks (callthrough.hooked_call_impl) until that first call, then torch's own again,
        and that module is watched from its class (see adopt_top_module). No global module hook
        (torch.compile(module) warns about those: the script's output must stay its own), and
        Module.__call__ stays torch's own (torch.compile(module) captures it before any call)."""
        if self.top_module is not None:
            return  # a reload after the outermost module was found: its class goes on being watched
        cls = module.Module
        if getattr(cls._call_impl, "_neurondesk", False):
            return
        self.module_cls, self.torch_call_impl = cls, cls._call_impl
        self.call_impl = hooked_call_impl(cls._call_impl, module.__dict__, self.pre, self.post)
        self.call_impl._neurondesk = True
        cls._call_impl = self.call_impl

    def patch_eval_frame(self, module) -> None:
        """torch.compile(model) runs the hooked _call_impl (torch's code, which dynamo skips) in
        Python, and would compile our hooks as frames of their own (tiny graphs in the user's
        TORCH_LOGS and compile counts). Dynamo is told to skip them there, so they run as in eager
        and the compiled model's forwards are watched; it still inlines them, as no-ops, where it
        traces a module call inside a compiled function."""
        codes = hooked_code() + (ForwardWatch.pre.__code__, ForwardWatch.post.__code__)
        try:  # skipped with all they call (torch 2.6+), as a torch._dynamo.disable would, without its frame
            from torch._dynamo.types import FrameAction, FrameExecStrategy

            skip = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)
            for code in codes:
                module.set_code_exec_strategy(code, skip)
        except (ImportError, AttributeError):
            for code in codes:
                module.skip_code(code)

    def pre(self, mod, args) -> None:
        """Torch calls this before each forward of a hooked class's modules; never raises."""
        if _state.is_compiling():  # dynamo folds this to True and traces the hook as a no-op
            return None
        thread = get_ident()
        stack = self.calls.get(thread)
        if stack is None:
            stack = self.calls[thread] = []
        state = None
        try:
            state = self._begin(mod, args, stack)
        except Exception as exc:  # noqa: BLE001 - fail open: the watch alone turns off
            self.probe.hook_failed("forward", exc)
        stack.append(state)
        return None

    def post(self, mod, args, *rest) -> None:
        """Torch calls this after each forward of a hooked class's modules, with (kwargs, result),
        or with (result,) when the forward raised; never raises."""
        if _state.is_compiling():
            return None
        thread = get_ident()
        stack = self.calls.get(thread)
        if not stack:
            return None
        state = stack.pop()
        if not stack:
            del self.calls[thread]
        if state is None:
            return None
        self.in_forward = False
        kwargs = rest[0] if len(rest) == 2 and type(rest[0]) is dict else {}
        try:
            self._end(args, kwargs, state)
        except Exception as exc:  # noqa: BLE001 - fail open: the watch alone turns off
            self.probe.hook_failed("forward", exc)
        return None

    def _begin(self, mod, args, stack: list):
        """A hooked call begins: None, or the state of a watched forward (its end needs it)."""
        probe = self.probe
        if self.top_module is None:  # the first module called: torch's own _call_impl from now on
            if self.module_cls.__dict__.get("_call_impl") is self.call_impl:
                self.module_cls._call_impl = self.torch_call_impl
            if not (probe.disabled or "forward" in probe.off):
                probe.guarded(self.adopt_top_module, mod, hook="forward")
        if self.in_forward and stack and stack[0] is not None and stack[0][0] is mod:
            # the outermost forward called again while it is "running": a KeyboardInterrupt (no
            # Exception, so torch ran no end hook) left it so; a module never calls itself
            stack.clear()
            self.in_forward = False
        if self.in_forward or probe.disabled or "forward" in probe.off:
            return None
        if self._tracing() is not None or not self.is_watched(mod):
            return None
        evaluating = self.facts.began(mod)
        self.in_forward = True
        if not evaluating:
            probe.clock.running_args = args
        return (mod, perf_counter(), probe.clock.inner, evaluating)

    def _end(self, args, kwargs, state) -> None:
        _, t0, inner0, evaluating = state
        clock = self.probe.clock
        clock.running_args = None
        self.facts.count_inputs(args, kwargs, evaluating)
        if not evaluating:  # a training forward: its host time, less syncs and collectives in it
            clock.fwd += perf_counter() - t0 - (clock.inner - inner0)
            clock.phased = True

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
        self.facts.seq_first = self.facts.sequence_first(mod)
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

    def _watch(self, mod) -> None:
        import weakref

        self.watched[id(mod)] = weakref.ref(mod)
        self.top_module = self.top_module or self.watched[id(mod)]
        self._watch_class(type(mod))
        self.probe.collective.ddp.watch(mod)  # a DDP module: its all-reduce's wait, at each backward

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
        """Every call of the class's modules goes through our two hooks. Where the class has torch's
        own _call_impl, it gets the hooked copy of it: while the forward runs, the frame on the
        stack is torch's own (no frame of ours in torch_xla's report, in a traceback, in py-spy).
        A class whose _call_impl is not torch's (torch._dynamo.disable on the class) is wrapped."""
        real = cls._call_impl  # torch's own (the first-call hook is gone), or the class's override
        if getattr(real, "_neurondesk", False):
            return  # this class is watched already
        self._tracing = self._jit_tracing_state()
        if real is self.torch_call_impl:
            cls._call_impl = self.call_impl
            return
        watch = self

        def _call_impl(m, *args, **kwargs):
            if _state.is_compiling():
                return real(m, *args, **kwargs)
            watch.pre(m, args)
            try:
                result = real(m, *args, **kwargs)
            except BaseException:
                watch.post(m, args, None)
                raise
            watch.post(m, args, kwargs, result)
            return result

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
        """One whole forward of a watched module, its beginning and its end; never raises."""
        return self.facts.whole(mod, args, kwargs)
