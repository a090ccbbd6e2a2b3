"""A reduced RunState as plain data, for comparing two states field by field in tests."""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections import deque

from neurondesk.core.reduce.state import RunState


def canon(state: RunState):
    parts = {id(p) for p in state.parts}
    return _canon(state.__getstate__(), parts, top=True)


def _canon(x, parts: set[int], top: bool = False):
    if isinstance(x, float):
        return "nan" if math.isnan(x) else x
    if x is None or isinstance(x, str | int | bool | bytes):
        return x
    if isinstance(x, dict):
        return sorted(((repr(k), _canon(v, parts)) for k, v in x.items()), key=lambda kv: kv[0])
    if isinstance(x, deque):
        return ("deque", x.maxlen, [_canon(v, parts) for v in x])
    if isinstance(x, list | tuple | array):
        if hasattr(x, "_fields") and id(x) not in parts:  # a NamedTuple: Parts
            return [_canon(v, parts, top=True) for v in x]
        return [_canon(v, parts) for v in x]
    if isinstance(x, set | frozenset):
        return sorted(repr(_canon(v, parts)) for v in x)
    if id(x) in parts and not top:
        return ("->", type(x).__name__)  # a reducer another one reads: compared where it is owned
    if dataclasses.is_dataclass(x):
        return (type(x).__name__, [(f.name, _canon(getattr(x, f.name), parts)) for f in dataclasses.fields(x)])
    if hasattr(x, "__dict__"):
        return (type(x).__name__, _canon(vars(x), parts))
    if hasattr(x, "__slots__"):
        return (type(x).__name__, [(s, _canon(getattr(x, s, None), parts)) for s in x.__slots__])
    return repr(x)
