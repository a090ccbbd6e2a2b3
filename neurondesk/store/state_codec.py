"""A RunState as data this project owns (the payload of a checkpoint, store/checkpoint.py): no pickle,
nothing a library decides.

The state is a graph (reducers read each other, a record sits in two lists), so it is written as a
flat table of nodes: node 0 is the RunState; a node is a container or an object, and what it holds
is scalars (None, bool, int, float, str) or references ``[i]`` to other nodes, so a value
shared by two parts is shared again after a load. The table goes through msgspec's msgpack with a
fixed typed schema (``Node`` below): whatever the file says, decoding cannot nest deeper than that
schema (a reference is a number, never a nested value), so a crafted file cannot recurse or expand.

What each node kind means is written here, not by a library: objects are named ``module:Class`` and
hold (field name, value) pairs; loading looks the class up among the modules of neurondesk.core that
are already imported (nothing is imported, nothing outside core is ever named) and builds it without
running its code: dataclasses and plain reducer classes are made empty and given their fields;
msgspec Structs and NamedTuples are called with their fields as arguments (the public constructor,
the same in every msgspec release); RunState gets ``__setstate__`` last (it rebuilds its dispatch).

Immutable nodes (tuples, frozensets, Structs, NamedTuples) are written after what they hold, so a
load builds them in table order; mutable ones are written before (a cycle through them works).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from array import array
from collections import Counter, deque
from typing import Any

import msgspec

from neurondesk.core.reduce.state import RunState

SCHEMA = 1  # what the node kinds below mean; a change of them is a new SCHEMA

Ref = tuple[int]
Value = None | bool | int | float | str | Ref

# node kinds
LIST, TUPLE, SET, FROZENSET, DICT, DEQUE, COUNTER, ARRAY, OBJECT = range(9)
_IMMUTABLE_CONTAINERS = (TUPLE, FROZENSET)
_SCALARS = (type(None), bool, int, float, str)
_ARRAY_CODES = frozenset("bBhHiIlLqQfd")
_MODULE = re.compile(r"neurondesk\.core(\.[a-z_][a-z0-9_]*)+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Node(msgspec.Struct, array_like=True, frozen=True):
    kind: int
    items: list[Value] = []  # containers: their values; dicts, counters, objects: key, value, key, value ...
    name: str = ""  # objects: "module:Class"; arrays: the typecode
    maxlen: int = -1  # deques: maxlen (-1: none)
    raw: bytes = b""  # arrays: their bytes (this machine's byte order: read on the machine that wrote them)


class StateCodecError(ValueError):
    """A state that cannot be encoded, or a payload that is not one; the message is a few words."""


_DECODER = msgspec.msgpack.Decoder(list[Node])
_ENCODER = msgspec.msgpack.Encoder()


# ---------------------------------------------------------------- encode
def encode_state(state: RunState) -> bytes:
    """The state as msgpack bytes (StateCodecError: a value of a type this file does not know)."""
    nodes: list[Node | None] = []
    memo: dict[int, int] = {}
    keep: list[Any] = []

    def value(x: Any) -> Value:
        if type(x) in _SCALARS:
            return x
        i = memo.get(id(x))
        return (i,) if i is not None else (node(x),)

    def reserve(x: Any) -> int:  # a mutable node takes its place before what it holds (cycles)
        keep.append(x)  # ids are of live objects only: none is freed and its id reused while encoding
        memo[id(x)] = len(nodes)
        nodes.append(None)
        return memo[id(x)]

    def put(n: Node, x: Any) -> int:  # an immutable node: after what it holds
        keep.append(x)
        memo[id(x)] = len(nodes)
        nodes.append(n)
        return memo[id(x)]

    def pairs(d: dict) -> list[Value]:
        return [v for k, x in d.items() for v in (value(k), value(x))]

    def node(x: Any) -> int:
        t = type(x)
        if t is list:
            i = reserve(x)
            nodes[i] = Node(LIST, [value(v) for v in x])
        elif t is dict or t is Counter:
            i = reserve(x)
            nodes[i] = Node(DICT if t is dict else COUNTER, pairs(x))
        elif t is set:
            i = reserve(x)
            nodes[i] = Node(SET, [value(v) for v in x])
        elif t is deque:
            i = reserve(x)
            nodes[i] = Node(DEQUE, [value(v) for v in x], maxlen=-1 if x.maxlen is None else x.maxlen)
        elif t is array:
            i = put(Node(ARRAY, name=x.typecode, raw=x.tobytes()), x)
        elif t is tuple or t is frozenset:
            items = [value(v) for v in x]
            i = put(Node(TUPLE if t is tuple else FROZENSET, items), x)
        else:
            i = _object(x, t)
        return i

    shapes: dict[type, tuple[str, str, tuple[str, ...]]] = {}  # a class: its name, how it is read, its fields

    def shape(t: type) -> tuple[str, str, tuple[str, ...]]:
        name = f"{t.__module__}:{t.__qualname__}"
        if _class(name) is not t:
            raise StateCodecError(f"a {t.__module__}.{t.__qualname__} in the state: not a class of neurondesk.core")
        if issubclass(t, msgspec.Struct):
            return name, "struct", tuple(t.__struct_fields__)
        if issubclass(t, tuple):  # a NamedTuple
            return name, "struct", tuple(t._fields)
        if dataclasses.is_dataclass(t):
            return name, "dataclass", tuple(f.name for f in dataclasses.fields(t))
        if t is RunState:
            return name, "state", ()
        if hasattr(t, "__slots__"):
            raise StateCodecError(f"a {name} in the state: neither a dataclass, a Struct nor a plain class")
        return name, "plain", ()

    def _object(x: Any, t: type) -> int:
        found = shapes.get(t)
        if found is None:
            found = shapes[t] = shape(t)
        name, how, fields = found
        if how == "struct":  # immutable: after its fields
            return put(Node(OBJECT, [v for f in fields for v in (f, value(getattr(x, f)))], name), x)
        i = reserve(x)
        if how == "dataclass":
            items = [v for f in fields for v in (f, value(getattr(x, f)))]
        else:
            d = x.__getstate__() if how == "state" else vars(x)
            items = [v for f, y in d.items() for v in (f, value(y))]
        nodes[i] = Node(OBJECT, items, name)
        return i

    try:
        if node(state) != 0:
            raise StateCodecError("the state is not the first node")
    except RecursionError as e:  # a workload's config nested past Python's limit, say
        raise StateCodecError("a value in the state is nested too deep to be written") from e
    try:
        return _ENCODER.encode(nodes)
    except (msgspec.EncodeError, OverflowError) as e:  # an int past 64 bits, say
        raise StateCodecError(f"cannot be encoded ({e})") from e


# ---------------------------------------------------------------- decode
def _class(name: str) -> type | None:
    """The class ``module:Class`` names, among neurondesk.core's modules already imported (None: no such)."""
    module, _, qualname = name.partition(":")
    if not _MODULE.fullmatch(module) or not _NAME.fullmatch(qualname):
        return None
    found = getattr(sys.modules.get(module), qualname, None)
    if not isinstance(found, type) or found.__module__ != module or found.__qualname__ != qualname:
        return None
    return found


def decode_state(data: bytes) -> RunState:
    """The RunState ``data`` holds (StateCodecError, a few words, for anything else)."""
    try:
        nodes = _DECODER.decode(data)
    except msgspec.DecodeError as e:
        raise StateCodecError(f"not a state table ({e})") from e
    try:
        return _Loader(nodes).load()
    except StateCodecError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError) as e:
        raise StateCodecError(f"not a state ({type(e).__name__}: {e})") from e


class _Loader:
    """Three passes over the table: empty mutable nodes; immutable ones in order; then fill. What a
    class name and a list of field names were found to be is kept for the load (thousands of step
    records share a few shapes)."""

    def __init__(self, nodes: list[Node]) -> None:
        if not nodes:
            raise StateCodecError("an empty state table")
        self.nodes = nodes
        self.out: list[Any] = [None] * len(nodes)
        self.built = [False] * len(nodes)
        self._classes: dict[str, type] = {}
        self._immutables: dict[str, bool] = {}
        self._dataclass_fields: dict[type, frozenset[str] | None] = {}
        self._shapes: set[tuple[str, tuple[str, ...]]] = set()  # (class name, field names) found right

    def load(self) -> RunState:
        nodes, out, built = self.nodes, self.out, self.built
        for i, n in enumerate(nodes):
            out[i] = self._empty(n)
            built[i] = out[i] is not None  # immutable ones are built in the next pass
        for i, n in enumerate(nodes):
            if not built[i]:
                out[i] = self._immutable(n)
                built[i] = True
        for i, n in enumerate(nodes):  # objects first: a set or dict key that is one hashes its fields
            if i and n.kind == OBJECT and not self._is_immutable(n):
                self._fill_object(out[i], n)
        for i, n in enumerate(nodes):
            if n.kind in (LIST, SET, DICT, COUNTER, DEQUE):
                self._fill(out[i], n)
        state = out[0]
        if type(state) is not RunState:
            raise StateCodecError("its first node is not a run state")
        state.__setstate__(self._fields(nodes[0], None))
        return state

    def _value(self, v: Value) -> Any:
        if type(v) is not tuple:
            return v
        if not 0 <= v[0] < len(self.nodes):
            raise StateCodecError(f"a reference {v[0]} out of the table")
        if not self.built[v[0]]:  # an immutable node refers only to nodes written before it
            raise StateCodecError("a reference to a node not built yet")
        return self.out[v[0]]

    def _values(self, items: list[Value]) -> list[Any]:
        ref = self._value  # called for references only: most values are scalars
        return [v if type(v) is not tuple else ref(v) for v in items]

    def _class(self, name: str) -> type:
        cls = self._classes.get(name)
        if cls is None:
            cls = _class(name)
            if cls is None:
                raise StateCodecError(f"names {name[:80]!r}, not a class of neurondesk.core")
            self._classes[name] = cls
        return cls

    def _is_immutable(self, n: Node) -> bool:
        if n.kind in _IMMUTABLE_CONTAINERS:
            return True
        if n.kind != OBJECT:
            return False
        found = self._immutables.get(n.name)
        if found is None:
            cls = self._class(n.name)
            found = self._immutables[n.name] = issubclass(cls, msgspec.Struct) or issubclass(cls, tuple)
        return found

    def _empty(self, n: Node) -> Any:
        kind = n.kind
        if kind == LIST:
            return []
        if kind == DICT:
            return {}
        if kind == SET:
            return set()
        if kind == COUNTER:
            return Counter()
        if kind == DEQUE:
            return deque(maxlen=None if n.maxlen == -1 else n.maxlen)
        if kind == ARRAY:
            if n.name not in _ARRAY_CODES:
                raise StateCodecError(f"an array of typecode {n.name[:20]!r}")
            obj = array(n.name)
            obj.frombytes(n.raw)
            return obj
        if kind in _IMMUTABLE_CONTAINERS:
            return None
        if kind != OBJECT:
            raise StateCodecError(f"a node of kind {kind}")
        if self._is_immutable(n):
            return None
        cls = self._class(n.name)
        if cls.__new__ is not object.__new__:
            raise StateCodecError(f"{n.name} is not built without running its code")
        return object.__new__(cls)

    def _fields(self, n: Node, own: frozenset[str] | tuple[str, ...] | None) -> dict[str, Any]:
        """The node's fields by name; ``own``: the names the class has (a set: all of them, any
        order; a tuple: all of them, in that order; None: any names)."""
        names = tuple(n.items[0::2])
        if (n.name, names) not in self._shapes:
            if len(n.items) % 2 or not all(type(k) is str and _NAME.fullmatch(k) for k in names):
                raise StateCodecError(f"{n.name[:80]}: a field name that is not a name")
            if own is not None and (names != own if isinstance(own, tuple) else set(names) != own):
                raise StateCodecError(f"{n.name}: fields {list(names)} are not its own")
            self._shapes.add((n.name, names))
        return dict(zip(names, self._values(n.items[1::2]), strict=True))

    def _immutable(self, n: Node) -> Any:
        if n.kind == TUPLE:
            return tuple(self._values(n.items))
        if n.kind == FROZENSET:
            return frozenset(self._values(n.items))
        cls = self._class(n.name)
        if issubclass(cls, msgspec.Struct):
            return cls(**self._fields(n, frozenset(cls.__struct_fields__)))
        return cls(*self._fields(n, tuple(cls._fields)).values())

    def _fill_object(self, obj: Any, n: Node) -> None:
        cls = type(obj)
        if cls not in self._dataclass_fields:
            self._dataclass_fields[cls] = (frozenset(f.name for f in dataclasses.fields(cls))
                                           if dataclasses.is_dataclass(cls) else None)
        own = self._dataclass_fields[cls]
        if own is not None:
            setattr_ = object.__setattr__  # frozen dataclasses too
            for k, v in self._fields(n, own).items():
                setattr_(obj, k, v)
        else:
            obj.__dict__.update(self._fields(n, None))

    def _fill(self, obj: Any, n: Node) -> None:
        values = self._values(n.items)
        if n.kind in (DICT, COUNTER):
            if len(values) % 2:
                raise StateCodecError("a mapping with an odd number of items")
            dict.update(obj, zip(values[0::2], values[1::2], strict=True))  # Counter.update would add
        elif n.kind == SET:
            obj.update(values)
        else:
            obj.extend(values)
