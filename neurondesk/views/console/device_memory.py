"""The Devices panel's Neuron memory by category: one stacked bar per NeuronCore in use (tensors,
constants, model code, shared scratchpad, runtime, as neuron-monitor's ``memory_used`` reports
them), its length against the core's HBM share, then the run's peak per category and the HBM
headroom (computed in core: core/reduce/neuron_memory.py, core/view/devices_view.py; drawn here)."""

from __future__ import annotations

import textwrap

from rich.text import Text

from neurondesk.core.events.device_events import NeuronProfileCapture
from neurondesk.core.reduce.neuron_memory import DEVICE_CATEGORIES
from neurondesk.core.view.devices_view import NeuronMemory
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean

STYLE = {"tensors": "magenta", "constants": "cyan", "model_code": "blue", "model_shared_scratchpad": "yellow",
         "runtime_memory": "green"}
LABEL = {"tensors": "tensors", "constants": "constants", "model_code": "model code",
         "model_shared_scratchpad": "shared scratchpad", "runtime_memory": "runtime"}
MAX_CORES_SHOWN = 8


def short_bytes(n: int) -> str:
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= size:
            text = f"{n / size:.1f}" if n < 100 * size else f"{n / size:.0f}"
            return text.removesuffix(".0") + unit
    return f"{n}B"


def _segments(shares: tuple[tuple[str, float], ...], width: int) -> list[tuple[str, int]]:
    """(category, cells) for each category's share of the bar; a category holding anything gets at
    least one cell while there is room."""
    out, used = [], 0
    for k, share in shares:
        if used >= width:
            continue
        cells = min(width - used, max(1, round(share * width)))
        out.append((k, cells))
        used += cells
    return out


def memory_by_category(t: Text, memory: NeuronMemory, width: int) -> None:
    """Appends the stacked bars, a legend, the peaks and the headroom."""
    bar_w = max(10, min(40, width - 24))
    t.append("\n  memory by category", style="bold")
    for c in memory.cores[:MAX_CORES_SHOWN]:
        t.append(f"\n  nc{c.core!s:<4}")
        drawn = 0
        for k, cells in _segments(c.shares, bar_w):
            t.append("█" * cells, style=STYLE.get(k, "white"))
            drawn += cells
        t.append(" " * (bar_w - drawn), style="on grey19")
        of = f"/{short_bytes(c.capacity)}" if c.capacity else " (capacity ?)"
        t.append(f" {short_bytes(c.used)}{of}", style="dim")
    if len(memory.cores) > MAX_CORES_SHOWN:
        t.append(f"\n  … {len(memory.cores) - MAX_CORES_SHOWN} more cores", style="dim")
    t.append("\n  ")
    for k in DEVICE_CATEGORIES:
        t.append("■ ", style=STYLE[k])
        t.append(f"{LABEL[k]}  ", style="dim")
    _peaks(t, memory, width)


def _peaks(t: Text, memory: NeuronMemory, width: int) -> None:
    words = ", ".join(f"{LABEL.get(k, k)} {short_bytes(v)}" for k, v in memory.peaks if v)
    for line in textwrap.wrap(f"peak per core: {words or 'none'}", max(20, width - 2), subsequent_indent="  "):
        t.append("\n  " + line, style="dim")
    room = memory.headroom
    if room is not None:
        line = f"HBM headroom {fmt.gib(room.free_bytes)} ({room.free_fraction:.0%}) on nc{room.core} at its peak"
        t.append("\n  " + fmt.ellipsize(line, max(20, width - 2)),
                 style="bold yellow" if room.free_fraction < 0.1 else "dim")


def profile_line(t: Text, p: NeuronProfileCapture | None, width: int) -> None:
    """A Neuron Explorer capture of the run: where it goes and the command that opens it."""
    if p is None:
        return
    text = clean(f"Neuron Explorer capture → {p.folder} · open: {p.open_command}")
    for line in textwrap.wrap(text, max(20, width - 2), subsequent_indent="  ", break_on_hyphens=False)[:4]:
        t.append("\n  " + line, style="dim")
    if p.torch_profiler_at:
        text = clean(f"torch.profiler is on too ({p.torch_profiler_at}): the two conflict")
        for line in textwrap.wrap(text, max(20, width - 2), subsequent_indent="  ")[:2]:
            t.append("\n  " + line, style="yellow")
