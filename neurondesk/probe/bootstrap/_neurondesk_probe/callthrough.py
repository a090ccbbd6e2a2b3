"""Hooks around a call that leave no frame of ours on the stack while the call runs.

A wrapper function of ours around torch_xla.sync or PerDeviceLoader.next sits
on the stack for as long as the wrapped call runs, and torch_xla's own report (PT_XLA_DEBUG,
"Python Frame Triggered Execution") prints it between torch_xla's frames and the user's; it even
changes the cause it names (torch_xla looks at the caller of `sync`). Instead, what the call
finds hands back torch's own function inside a C `functools.partial` (``Ending``): C calls it,
so no frame of ours is on the stack while it runs, and the hook ends when the partial is
released, which CPython does as soon as the call returns or raises (``Ending.__del__``).

- ``CallThrough`` (torch_xla.sync, PerDeviceLoader.next): an object put where the function was.
  Calling it makes CPython look up its ``__call__``, a descriptor (``_Begin``) whose lookup
  begins the hook and hands back the Ending, which CPython then calls with the call's
  arguments. Every way in is covered: a module attribute, a global name, a stored reference.

- ``hooked_call_impl`` (Module._call_impl): a descriptor on a module's class breaks dynamo's guards
  (torch.compile of that module fails: "ClosureGuardAccessor: Not a function"), so the class gets
  torch's own function again, its code object unchanged, over a copy of its module's globals in
  which the global forward-hook registries begin with our two hooks: torch calls them before and
  after the forward as it calls any registered hook, and while the forward runs the frame on the
  stack is torch's own `_call_impl` at torch's own line."""

from __future__ import annotations

import functools
import types
from collections import OrderedDict

from . import _state


class Ending(functools.partial):
    """torch's own function, its object bound where given (a C partial: no frame of ours while it
    runs); `end(state)` runs once it is released, right after the call."""

    __slots__ = ("end", "state")

    def __del__(self) -> None:
        try:
            self.end(self.state)
        except Exception:  # noqa: BLE001 - the end hooks are guarded; this is the last resort
            pass
        except BaseException as exc:  # a signal's (Ctrl-C) while the hook ran: CPython would drop it here
            _state.redeliver(exc)


def _ending(raw, end, state, *bound):
    call = Ending(raw, *bound)
    call.end, call.state = end, state
    return call


class _Begin:
    """CallThrough.__call__: looked up by CPython at each call; begins the hook."""

    __slots__ = ()

    def __get__(self, through, cls=None):
        if through is None:
            return self
        try:
            state = through.begin()
        except Exception:  # noqa: BLE001 - never raise into the call: torch's own function
            state = None
        return through.raw if state is None else _ending(through.raw, through.end, state)


class CallThrough:
    """Stands where a function was: calling it calls `raw` between `begin()` (a state, or None:
    not ours to count) and `end(state)`. As a class attribute it binds as a function does."""

    __slots__ = ("raw", "begin", "end", "__wrapped__", "_neurondesk")
    __call__ = _Begin()

    def __init__(self, raw, begin, end) -> None:
        self.raw, self.begin, self.end, self.__wrapped__, self._neurondesk = raw, begin, end, raw, True

    def __get__(self, obj, cls=None):
        return self if obj is None else types.MethodType(self, obj)

    def __getattr__(self, name: str):  # __name__, __qualname__, __module__ ... are torch's function's
        if name in CallThrough.__slots__:
            raise AttributeError(name)
        return getattr(self.raw, name)

    def __repr__(self) -> str:
        return f"<neurondesk call-through of {self.raw!r}>"


# The global forward-hook registries torch's _call_impl reads (torch/nn/modules/module.py).
_HOOK_REGISTRIES = ("_global_forward_pre_hooks", "_global_forward_hooks",
                    "_global_forward_hooks_with_kwargs", "_global_forward_hooks_always_called")
_PRE, _POST = -1, -2  # our hooks' ids: torch's RemovableHandle ids count up from 0


class _Registry(OrderedDict):
    """One of torch's global hook registries as the hooked _call_impl reads it: ours, then torch's
    own read live, so a global hook the user (or FlopCounterMode) registers or removes at any time
    runs as without neurondesk. Ours alone makes the registry true: torch takes its hooks path."""

    def __init__(self, own: dict, module_globals: dict, name: str) -> None:
        super().__init__(own)
        self.torch_registry = module_globals[name]

    def items(self):
        if not self.torch_registry:  # the usual case: ours alone
            return OrderedDict.items(self)
        return (*OrderedDict.items(self), *self.torch_registry.items())

    def __contains__(self, key) -> bool:
        return OrderedDict.__contains__(self, key) or key in self.torch_registry


def hooked_call_impl(call_impl, module_globals: dict, pre, post):
    """torch's `call_impl` (Module._call_impl), its own code, with `pre(module, args)` before each
    forward and `post(module, args, kwargs, result)` after it, or `post(module, args, result)` when
    the forward raised (torch's always-called hooks). The copy of its globals has no `__name__`, so
    dynamo, inlining it in a compiled module, reads and guards these registries, not the module's."""
    g = {k: v for k, v in module_globals.items() if k != "__name__"}
    own = {"_global_forward_pre_hooks": {_PRE: pre}, "_global_forward_hooks": {_POST: post},
           "_global_forward_hooks_with_kwargs": {_POST: True}, "_global_forward_hooks_always_called": {_POST: True}}
    for name in _HOOK_REGISTRIES:
        g[name] = _Registry(own[name], module_globals, name)
    fn = types.FunctionType(call_impl.__code__, g, call_impl.__name__, call_impl.__defaults__, call_impl.__closure__)
    fn.__qualname__, fn.__doc__, fn.__module__ = call_impl.__qualname__, call_impl.__doc__, call_impl.__module__
    return fn


def hooked_code() -> tuple:
    """The code of ours a hooked _call_impl calls (torch.compile must not take them for frames to compile)."""
    return (_Registry.items.__code__, _Registry.__contains__.__code__)
