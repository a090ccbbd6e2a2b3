"""Events to JSON lines and back, with every field's type checked (msgspec).

- ``encode_event(e) -> bytes``: one JSON object and a newline, ``"kind"`` first.
- ``decode_event_line(line) -> Event``: one journal line (bytes or str) back into its event.
- ``event_from_dict(d) -> Event``: an already decoded object into its event.
- ``event_to_dict(e) -> dict``: the event as JSON-friendly builtins, ``kind`` included.

The three decoders raise ``EventDecodeError`` (a ValueError) with a one-line reason: not JSON, not
an object, an unknown kind, a missing field, or a field of the wrong type (``"t": "abc"``,
``"step": 1.5``) — so a malformed event is refused at the boundary and never reaches the reducer.
Keys a kind does not know are ignored (a newer journal still replays). Nested records (a core in
a neuron-monitor sample, a process in the process tree) are built from their JSON objects.

Fast path: msgspec encodes the dataclass, and decodes a line that starts with its kind (as
``encode_event`` writes them, and as the probe sends them) straight into its type, without an
intermediate dict (``decode_known_kind``). Any other line is decoded to a dict and converted; a
line the fast path refuses is decoded again the slow way, so the error message is the same
either way. Two cases go through the standard
``json`` module, so that nothing the workload printed is lost and old journals still read:
text with lone surrogates (an undecodable byte in the workload's output; written as ``\\udcff``
escapes) and non-finite floats (a ``nan`` loss; written as ``NaN`` / ``Infinity``, which msgspec
would turn into ``null``).
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import msgspec

from neurondesk.core.events.registry import EVENT_CLASSES, EVENT_TYPES
from neurondesk.core.events.run_events import Event


class EventDecodeError(ValueError):
    """A line or object that is not a valid event; the message says why."""


_encode = msgspec.json.Encoder(enc_hook=str).encode
_decode = msgspec.json.Decoder().decode
_convert = msgspec.convert
_isfinite = math.isfinite


# ---------------------------------------------------------------- per-class facts, computed once

_SHALLOW_LEAVES = (str, int, bool, type(None))


def _shallow(tp: Any) -> bool:
    """A type that cannot hold a float below the top level: str, int, bool, None, and lists of
    those (lists of lists too: input shapes)."""
    if tp in _SHALLOW_LEAVES:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return all(_shallow(a) or a is float for a in typing.get_args(tp))
    if origin is list:
        (arg,) = typing.get_args(tp)
        return _shallow(arg) and arg is not float
    return False


def _floats_of(tp: Any) -> bool:
    if tp is float:
        return True
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return float in typing.get_args(tp)
    return False


class _ClassInfo:
    __slots__ = ("prefix", "floats", "deep")

    def __init__(self, cls: type[Event]) -> None:
        hints = typing.get_type_hints(cls)
        names = [f.name for f in fields(cls)]
        self.prefix = b'{"kind":' + _encode(cls.kind) + b","
        self.floats = tuple(n for n in names if _floats_of(hints[n]))  # top-level float fields
        self.deep = not all(_shallow(hints[n]) or _floats_of(hints[n]) for n in names)


_INFO: dict[type, _ClassInfo] = {cls: _ClassInfo(cls) for cls in EVENT_CLASSES}


def _nonfinite(x: Any) -> bool:
    """A float that is nan or ±inf anywhere in ``x`` (records, dicts, lists)."""
    if isinstance(x, float):
        return not _isfinite(x)
    if isinstance(x, dict):
        return any(_nonfinite(v) for v in x.values())
    if isinstance(x, list | tuple):
        try:  # a column of numbers (a StepBatch's): checked at C speed
            return not all(map(_isfinite, x))
        except (TypeError, OverflowError):  # lists, records, strings, huge ints inside: one by one
            return any(_nonfinite(v) for v in x)
    if hasattr(x, "__dataclass_fields__"):
        return any(_nonfinite(getattr(x, name)) for name in x.__dataclass_fields__)
    return False


# ---------------------------------------------------------------- encoding


def event_to_dict(event: Event) -> dict[str, Any]:
    d = msgspec.to_builtins(event, enc_hook=str)
    return {"kind": event.kind, **d}


def _encode_slow(event: Event) -> bytes:
    # ensure_ascii: lone surrogates survive as \\udcxx escapes; allow_nan: NaN stays NaN
    return json.dumps(event_to_dict(event), separators=(",", ":"), default=str).encode("ascii") + b"\n"


def encode_event(event: Event) -> bytes:
    """One journal line: ``{"kind":...,"t":...,...}\\n``."""
    info = _INFO.get(type(event))
    if info is None:
        raise TypeError(f"{type(event).__name__} is not a registered event type (core/events/registry.py)")
    for name in info.floats:
        v = getattr(event, name)
        if v is not None and not _isfinite(v):
            return _encode_slow(event)
    if info.deep and _nonfinite(event):
        return _encode_slow(event)
    try:
        body = _encode(event)
    except UnicodeEncodeError:  # a lone surrogate in some text
        return _encode_slow(event)
    return info.prefix + body[1:] + b"\n"


# ---------------------------------------------------------------- decoding


def event_from_dict(d: Any) -> Event:
    if not isinstance(d, dict):
        raise EventDecodeError(f"expected a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventDecodeError(f"unknown event kind {kind!r}" if "kind" in d else "no event kind")
    try:
        return _convert(d, cls)
    except msgspec.ValidationError as e:
        raise EventDecodeError(f"{kind} event: {e}") from None
    except UnicodeEncodeError:  # msgspec wording the refusal of a wrong-typed field holding a lone surrogate
        raise EventDecodeError(f"{kind} event: a field of the wrong type holds text that is not valid Unicode") from None


def loads(line: bytes | str) -> Any:
    """JSON text to Python objects: msgspec, or the json module for what msgspec refuses but old
    journals and the workload's text may hold (NaN, lone surrogate escapes, bytes not UTF-8)."""
    try:
        return _decode(line)
    except RecursionError:
        raise EventDecodeError("not JSON (nested too deeply)") from None
    except (msgspec.DecodeError, UnicodeEncodeError) as fast_error:  # UnicodeEncodeError: a str with lone surrogates
        text = line.decode("utf-8", "replace") if isinstance(line, bytes | bytearray) else line
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise EventDecodeError(f"not JSON ({fast_error})") from None


_KIND_HEAD = b'{"kind":"'
_TYPED: dict[bytes, Callable[[bytes], Event]] = {
    cls.kind.encode(): msgspec.json.Decoder(cls).decode for cls in EVENT_CLASSES
}


def decode_known_kind(line: bytes | str) -> Event | None:
    """The event of a line that begins ``{"kind":"<known kind>",``, decoded straight into its type;
    None when the line does not begin so or does not decode that way (the caller then takes the
    general path, which gives the reason)."""
    if type(line) is not bytes or not line.startswith(_KIND_HEAD):  # bytearray, memoryview: general path
        return None
    decode = _TYPED.get(line[9:line.find(b'"', 9)])
    if decode is None:
        return None
    try:
        return decode(line)
    except (msgspec.DecodeError, RecursionError):  # a wrong type, a missing field, NaN, lone surrogates ...
        return None


def decode_event_line(line: bytes | str) -> Event:
    event = decode_known_kind(line)
    if event is not None:
        return event
    return event_from_dict(loads(line))
