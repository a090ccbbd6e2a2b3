"""Small helpers shared by the log parsers."""

from __future__ import annotations

import re

from neurondesk.core.events.run_events import Event

Out = list[Event]  # sub-parsers append the events a line produced here

COMPILE, ERROR, NOISE = "compile", "error", "noise"
TAG_RANK = {ERROR: 3, COMPILE: 2, NOISE: 1}  # when two parsers tag one line, the higher wins

MAX_MESSAGE = 4000  # a message copied into an event is clipped to this many characters

# Library code a frame can live in (torch, installed packages, the standard library, frozen
# modules); anything else counts as the user's own code.
_LIB_SEGMENTS = frozenset({"torch", "torch_xla", "site-packages", "dist-packages"})
_SEP = re.compile(r"[\\/]")
_STDLIB = re.compile(r"[\\/]lib[\\/]python\d[\d.]*[\\/]", re.IGNORECASE)

# One float as a program prints it, including the values that matter most when they appear.
NUMBER = r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)(?!\w)"

# Compiler error codes as printed in brackets: [NCC_EOOM002], [TEN404], [F134].
ERROR_CODE = re.compile(r"\[(NCC_[A-Z]{4}\d{3}|[A-Z]{3}\d{3}|F\d{3})\]")


def is_library_path(path: str) -> bool:
    # neurondesk's own probe wraps torch_xla.sync, so it shows in torch_xla's frame lists (a
    # package _neurondesk_probe/ since the split; one file _neurondesk_probe.py before)
    if path.startswith("<frozen") or _STDLIB.search(path) or path.endswith("_neurondesk_probe.py"):
        return True
    segments = _SEP.split(path)
    return "_neurondesk_probe" in segments[:-1] or any(seg in _LIB_SEGMENTS for seg in segments)


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [+{len(text) - limit} chars]"


def small_int(text: str | None) -> int | None:
    """An integer read from a log line, or None when it is not one or has more digits than any
    count, pid or time field can (a line of thousands of digits is not a number to convert)."""
    if not text:
        return None
    digits = text[1:] if text[0] in "+-" else text
    if not digits.isdigit() or len(digits) > 18:
        return None
    return int(text)

