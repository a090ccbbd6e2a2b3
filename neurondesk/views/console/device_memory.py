"""The Devices panel's Neuron memory by category: one stacked bar per NeuronCore in use (tensors,
constants, model code, shared scratchpad, runtime, as neuron-monitor's ``memory_used`` reports
them), its length against the core's HBM share, then the run's peak per category and the HBM
headroom (both computed in core/reduce/neuron_memory.py; rendered here)."""

from __future__ import annotations

import textwrap

from rich.text import Text

from neurondesk.core.reduce.neuron_memory import DEVICE_CATEGORIES
from neurondesk.core.reduce.state import RunState
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


def _segments(memory: dict[str, int], scale: int, width: int) -> list[tuple[str, int]]:
    """(category, cells) for each category with memory, the cells proportional to ``scale``;
    a category holding anything gets at least one cell while there is room."""
    out, used = [], 0
    for k in sorted(memory, key=lambda k: (DEVICE_CATEGORIES.index(k) if k in DEVICE_CATEGORIES else 99, k)):
        if memory[k] <= 0 or used >= width:
            continue
        cells = min(width - used, max(1, round(memory[k] / scale * width)))
        out.append((k, cells))
        used += cells
    return out


def memory_by_category(t: Text, state: RunState, width: int) -> None:
    """Appends the stacked bars, a legend, the peaks and the headroom; nothing without a Neuron
    sample that reports memory."""
    sample, tel = state.neuron, state.parts.telemetry
    cores = [c for c in (sample.cores if sample is not None else []) if c.memory and (c.memory_total or 0) > 0]
    if not cores:
        return
    cores.sort(key=lambda c: -(c.memory_total or 0))
    bar_w = max(10, min(40, width - 24))
    t.append("\n  memory by category", style="bold")
    for c in cores[:MAX_CORES_SHOWN]:
        capacity = tel.core_capacity(c.core)
        used = c.memory_total or sum(c.memory.values())
        scale = capacity if capacity and capacity >= used else used
        t.append(f"\n  nc{c.core!s:<4}")
        drawn = 0
        for k, cells in _segments(c.memory, scale, bar_w):
            t.append("█" * cells, style=STYLE.get(k, "white"))
            drawn += cells
        t.append(" " * (bar_w - drawn), style="on grey19")
        of = f"/{short_bytes(capacity)}" if capacity else " (capacity ?)"
        t.append(f" {short_bytes(used)}{of}", style="dim")
    if len(cores) > MAX_CORES_SHOWN:
        t.append(f"\n  … {len(cores) - MAX_CORES_SHOWN} more cores", style="dim")
    t.append("\n  ")
    for k in DEVICE_CATEGORIES:
        t.append("■ ", style=STYLE[k])
        t.append(f"{LABEL[k]}  ", style="dim")
    _peaks(t, state, width)


def _peaks(t: Text, state: RunState, width: int) -> None:
    tel = state.parts.telemetry
    peaks = tel.neuron_memory.category_peaks()
    words = ", ".join(f"{LABEL.get(k, k)} {short_bytes(v)}" for k, v in peaks.items() if v)
    for line in textwrap.wrap(f"peak per core: {words or 'none'}", max(20, width - 2), subsequent_indent="  "):
        t.append("\n  " + line, style="dim")
    room = tel.hbm_headroom()
    if room is not None:
        line = f"HBM headroom {fmt.gib(room.free_bytes)} ({room.free_fraction:.0%}) on nc{room.core} at its peak"
        t.append("\n  " + fmt.ellipsize(line, max(20, width - 2)),
                 style="bold yellow" if room.free_fraction < 0.1 else "dim")


def profile_line(t: Text, state: RunState, width: int) -> None:
    """A Neuron Explorer capture of the run: where it goes and the command that opens it."""
    p = state.parts.telemetry.neuron_profile
    if p is None:
        return
    text = clean(f"Neuron Explorer capture → {p.folder} · open: {p.open_command}")
    for line in textwrap.wrap(text, max(20, width - 2), subsequent_indent="  ", break_on_hyphens=False)[:4]:
        t.append("\n  " + line, style="dim")
    if p.torch_profiler_at:
        text = clean(f"torch.profiler is on too ({p.torch_profiler_at}): the two conflict")
        for line in textwrap.wrap(text, max(20, width - 2), subsequent_indent="  ")[:2]:
            t.append("\n  " + line, style="yellow")
