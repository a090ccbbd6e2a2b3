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
