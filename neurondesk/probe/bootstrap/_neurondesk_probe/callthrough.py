"""Hooks around a call that leave no frame of ours on the stack while the call runs.

A wrapper function of ours around torch_xla.sync, PerDeviceLoader.next or Module._call_impl sits
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
- ``MethodThrough`` (Module._call_impl, whose hook reads the call's arguments): a descriptor whose
  lookup from a known call site (`is_call(frame)`) hands back the Ending, the call's arguments
  read from that frame; any other lookup (dynamo tracing, class access) gets the plain wrapper
  function (``fallback``), which counts the same with its frame visible."""

from __future__ import annotations

import functools
import sys
import types


class Ending(functools.partial):
    """torch's own function, its object bound where given (a C partial: no frame of ours while it
    runs); `end(state)` runs once it is released, right after the call."""

    __slots__ = ("end", "state")

    def __del__(self) -> None:
        try:
            self.end(self.state)
        except Exception:  # noqa: BLE001 - the end hooks are guarded; this is the last resort
            pass


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


class MethodThrough:
    """A method of a class: a lookup from a known call site (`is_call(frame)`) begins the hook
    (`begin(obj, frame)` -> a state, or None: torch's own bound method) and hands back the call;
    `end(state)` after it. Any other lookup gets the wrapper function `fallback`."""

    __slots__ = ("raw", "fallback", "begin", "end", "is_call")

    def __init__(self, raw, fallback, begin, end, is_call) -> None:
        self.raw, self.fallback, self.begin, self.end, self.is_call = raw, fallback, begin, end, is_call

    def __get__(self, obj, cls=None):
        if obj is None:
            return self.fallback
        return self.bind(obj, cls, sys._getframe(1))

    def bind(self, obj, cls, frame):
        try:
            if not self.is_call(frame):
                return self.fallback.__get__(obj, cls)
            state = self.begin(obj, frame)
        except Exception:  # noqa: BLE001 - never raise into the lookup: torch's own method
            state = None
        return self.raw.__get__(obj, cls) if state is None else _ending(self.raw, self.end, state, obj)
