"""Sizes in words, for the findings and the reducers that write them (the lowest wing that reads no event)."""

from __future__ import annotations


def size_text(n: int) -> str:
    """Bytes in their unit, one decimal: "3.0 MiB", "23.1 GiB"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
