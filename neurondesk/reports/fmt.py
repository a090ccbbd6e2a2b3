"""Numbers to short strings, for every view (console, headless, summary files). No metrics here."""

from __future__ import annotations

import math

from neurondesk.core.figures.run_figures import rate_text

NONE = "—"


def clock(seconds: float | None) -> str:
    """62.4 -> '1:02'; 3725 -> '1:02:05'."""
    if seconds is None:
        return NONE
    s = max(0, int(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def secs(x: float | None, nd: int = 1) -> str:
    if x is None:
        return NONE
    if x < 1:
        return f"{x * 1000:.0f} ms"
    return f"{x:,.{nd}f} s"


def ms(x: float | None) -> str:
    return NONE if x is None else f"{x * 1000:,.1f} ms"


def num(x: float | None, nd: int = 1) -> str:
    if x is None:
        return NONE
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:,.{nd}f}"


def rate(x: float | None) -> str:
    """A rate (samples/s, tokens/s, steps/hour: the figures' kind "rate") by the figures table's one
    rule (core/figures/run_figures.rate_text): 38,981.7 -> '38,982'; 191.94 -> '192'; 3.402 -> '3.40'."""
    if x is None:
        return NONE
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return rate_text(x)


def usd(x: float | None) -> str:
    if x is None:
        return NONE
    return f"${x:,.4f}" if abs(x) < 1 else f"${x:,.2f}"


def pct(x: float | None, nd: int = 1) -> str:
    """A fraction 0..1 as a percentage."""
    return NONE if x is None else f"{x * 100:.{nd}f}%"


def size_text(n: float) -> str:
    """Bytes in their unit: "45.0 MiB"."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"


def gib(n: float | None) -> str:
    return NONE if n is None else f"{n / 2**30:,.1f} GiB"


def short_location(location: str | None) -> str:
    """'/long/path/workloads/train.py:73' -> 'train.py:73'."""
    if not location:
        return NONE
    return location.rsplit("/", 1)[-1]


def shapes(s: list | None) -> str:
    if not s:
        return NONE
    return " ".join("×".join(str(d) for d in shape) if shape else "scalar" for shape in s)


def bar(fraction: float | None, width: int) -> tuple[str, str]:
    """(filled, empty) strings of a horizontal bar `width` cells wide, in eighths."""
    if fraction is None or width <= 0:
        return "", " " * max(width, 0)
    f = max(0.0, min(1.0, fraction)) * width
    full = int(f)
    part = int((f - full) * 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part and full < width else ""
    filled = "█" * full + partial.strip()
    return filled, " " * (width - len(filled))


def ellipsize(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def ellipsize_left(text: str, width: int) -> str:
    """Keep the end (file:line) of a long path-like string."""
    return text if len(text) <= width else "…" + text[len(text) - max(0, width - 1):]


def value_text(x, kind: str) -> str:
    """A figure as a report shows it, by its kind (core/figures/run_figures.py FigureInfo.kind, compare's rows)."""
    if x is None:
        return NONE
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if kind == "ms":
        return ms(x)
    if kind == "s":
        return f"{x:,.2f} s"
    if kind == "rate":
        return rate(x)
    if kind == "usd_h":
        return f"${x:,.4f}/h"  # list prices have up to 5 decimals (1.34375)
    if kind == "usd":
        return usd(x)
    if kind == "pct":
        return f"{x * 100:.2f}%"
    if kind == "pct1":
        return f"{x * 100:.1f}%"
    if kind == "loss":
        return f"{x:.4f}"
    if kind == "int":
        return f"{x:,}"
    if kind in ("bytes", "bytes_s"):  # a size, or a size a second
        return size_text(x) + ("/s" if kind == "bytes_s" else "")
    if kind == "num":
        return f"{x:g}"
    return str(x)
