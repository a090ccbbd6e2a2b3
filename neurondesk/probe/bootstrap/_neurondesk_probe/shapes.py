"""What the probe reads of a batch: its shape and whether it holds token ids. Never raises."""

from __future__ import annotations

import operator

# The input shapes one step keeps (its forwards', its loader batches'): a step's message names them,
# a few micro-batches at most. An eager inference or evaluation loop with no step boundary would
# otherwise add one per forward for days (issue 34 item 5: benchmarks/probe_forward_memory.py).
SHAPES_KEEP = 64


def dims_of(x) -> list[int] | None:
    """The shape of a tensor-like object as a list of non-negative ints, or None for anything else
    (a string, a number, an object whose `shape` is odd or whose attributes raise). Never raises."""
    try:
        shape = getattr(x, "shape", None)
        if not isinstance(shape, tuple) or len(shape) > 64:  # torch.Size and numpy shapes are tuples
            return None
        dims = [d if type(d) is int else operator.index(d) for d in shape]  # noqa: E721
        for d in dims:
            if d < 0:
                return None
        return dims
    except Exception:  # noqa: BLE001
        return None


def holds_ids(x) -> bool:
    """Whether a tensor-like object holds integers (token ids): a torch dtype that is not floating
    point, a numpy dtype of kind i/u. Anything else, or an error, is no."""
    try:
        dtype = x.dtype
        floating = getattr(dtype, "is_floating_point", None)
        if type(floating) is bool:
            return not floating
        kind = getattr(dtype, "kind", None)
        return type(kind) is str and kind in ("i", "u")
    except Exception:  # noqa: BLE001
        return False
