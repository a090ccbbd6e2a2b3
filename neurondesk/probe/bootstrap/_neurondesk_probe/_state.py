"""The one piece of state every hook reads first: whether dynamo is tracing it.

``is_compiling`` is replaced by torch.compiler.is_compiling once torch is loaded (see
optim.OptimizerHooks.patch_compiler). Every hook that torch can call from inside a torch.compile'd
region returns at once when it is True: dynamo then traces the hook as a no-op instead of breaking
the user's graph on our code. Hooks call it as ``_state.is_compiling()`` (a module attribute), so
the replacement is seen everywhere.
"""

from __future__ import annotations


def is_compiling() -> bool:
    return False


def env_int(name: str, environ=None) -> int | None:
    """A launcher's number (RANK, WORLD_SIZE, ...) as an int, or None: ASCII digits only, at most 7 of them.
    '²' is a digit to str.isdigit and not to int(): a launch variable holding it must never raise in a hook."""
    import os

    text = (environ if environ is not None else os.environ).get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 7 else None


def dressed(call, real):
    """``call``, a wrapper of ours, named and documented as ``real`` (what introspection and pickling by
    name see), marked as ours (``_neurondesk``) and pointing at it (``__wrapped__``)."""
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(call, attr, getattr(real, attr))
        except (AttributeError, TypeError):
            pass
    call.__wrapped__, call._neurondesk = real, True
    return call
