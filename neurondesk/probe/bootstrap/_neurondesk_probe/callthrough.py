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

Module._call_impl is not hooked this way: a descriptor on a module's class breaks dynamo's guards
on it (torch.compile of that module fails: "ClosureGuardAccessor: Not a function"), so its
wrapper function stays (forward.py), and its frame shows in torch_xla's report below the user's
line (docs/probe.md)."""

from __future__ import annotations

import functools
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
