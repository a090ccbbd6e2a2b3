"""Devices: per-core utilisation bars and memory — NeuronCores or GPUs when they are sampled,
else the host CPU per core and memory (and the panel says so)."""

from __future__ import annotations

import textwrap

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.reduce.state import RunState
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.derived import device_units, figures, memory_sum
from neurondesk.views.console.device_memory import memory_by_category, profile_line
from neurondesk.views.console.panel import Line, Panel


def util_style(u: float | None) -> str:
    if u is None:
        return "dim"
    return "green" if u >= 0.7 else ("yellow" if u >= 0.3 else "red")


def _mem(used: int | None, total: int | None) -> str:
    if used is None:
        return "mem —"
    if total:
        return f"{used / 2**30:.1f}/{total / 2**30:.0f}G"
    return fmt.gib(used)


def execution_text(state: RunState) -> str | None:
    """neuron-monitor's failed executions: per second in the latest report, and in all; None when
    there were none."""
    tel = state.parts.telemetry
    total = sum(tel.execution_errors_by_status.values())
    rate = state.neuron.execution_errors_per_s if state.neuron is not None else None
    if not total and not rate:
        return None
    by_class = sorted(tel.execution_errors_by_class.items(), key=lambda kv: (-kv[1], kv[0]))
    classes = f" ({', '.join(f'{k} {v}' for k, v in by_class)})" if by_class else ""
    return f"execution errors {rate or 0.0:.1f}/s now, {total} in all{classes}"


def hardware_text(state: RunState) -> str | None:
    """Device and core counts from neuron_hardware_info, when neuron-ls listed no devices."""
    hw = state.parts.telemetry.neuron_hardware
    inv = state.inventory
    if hw is None or hw.device_count is None or (inv is not None and inv.neuron is not None):
        return None
    each = f", {fmt.gib(hw.device_memory_bytes)} each" if hw.device_memory_bytes else ""
    devices = f"{hw.device_count} Neuron device{'s' if hw.device_count != 1 else ''}"
    return f"{devices} × {hw.cores_per_device or '?'} cores{each} (neuron_hardware_info)"


MAX_ROWS = 8  # bars are laid out in columns so that at most this many rows are used
LEVELS = " ▁▂▃▄▅▆▇█"


class DevicesPanel(Panel):
    NAME = "Devices"
    KEY = "d"

    def compose(self) -> ComposeResult:
        yield Line(id="devices-text")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._samples: tuple = ()

    def invalidate(self) -> None:
        super().invalidate()
        self._samples = ()

    @staticmethod
    def _bars(t: Text, kind: str, units: list, width: int) -> None:
        """One bar per unit, in as many columns as keep it within MAX_ROWS rows; each unit's
        memory beside its bar when there is room, else the sum below them."""
        per_mem = kind != "host"
        cols = -(-len(units) // MAX_ROWS)
        if per_mem and width // cols < 30:
            per_mem = False
        fixed = 13 + (10 if per_mem else 0)
        cols = max(cols, min(4, width // (fixed + 8), -(-len(units) // 2))) if len(units) > 2 else 1
        cell = width // cols
        bar_w = max(4, cell - fixed)
        for i, u in enumerate(units):
            t.append("\n" if i % cols == 0 else "")
            filled, empty = fmt.bar(u.util, bar_w)
            t.append(f"{u.label:>5} ")
            t.append(filled, style=util_style(u.util))
            t.append(empty, style="on grey19")
            t.append(f" {fmt.pct(u.util, 0):>4}")
            if per_mem:
                t.append(f" {_mem(u.mem_used, u.mem_total):>9}", style="dim")
            t.append("  " if (i + 1) % cols else "")
        if kind != "host" and not per_mem:
            used, total = memory_sum(units)
            what = {"neuron": "NeuronCores", "gpu": "GPUs"}.get(kind, kind)
            t.append(f"\n  device memory {_mem(used, total)} over {len(units)} {what}", style="dim")

    @staticmethod
    def _spark(t: Text, units: list, width: int) -> None:
        """Many units (a 128-vCPU host): one cell per unit, its height the utilisation."""
        per_line = max(16, min(64, width - 12))
        for start in range(0, len(units), per_line):
            chunk = units[start:start + per_line]
            t.append(f"\n{start:>4}-{start + len(chunk) - 1:<4} ", style="dim")
            for u in chunk:
                level = 0 if u.util is None else round(max(0.0, min(1.0, u.util)) * 8)
                t.append(LEVELS[level], style=util_style(u.util) + " on grey19")

    def render_state(self, state: RunState, now: float) -> None:
        samples = (id(state.neuron), id(state.gpu), id(state.host), id(state.process_tree), id(state.cache),
                   id(state.parts.telemetry.neuron_profile),
                   len(state.notices), state.reduce_errors, self.content_size, state.parts.disk.events)
        if samples == self._samples:
            return  # nothing new sampled since the last render
        self._samples = samples
        kind, units, note = device_units(state)
        t = Text()
        t.append(note, style="dim" if kind != "host" else "italic yellow")
        hardware = hardware_text(state) if kind == "neuron" else None
        if hardware:
            t.append(" · " + hardware, style="dim")
        inv = state.inventory
        if kind == "host" and inv is not None and (inv.neuron_reason or inv.gpu_reason):
            why = "; ".join(r for r in (inv.neuron_reason, inv.gpu_reason) if r)
            t.append("\n" + fmt.ellipsize(clean(why), max(20, self.content_size.width)), style="dim")
        width = max(30, self.content_size.width)
        if len(units) > MAX_ROWS * 4:
            self._spark(t, units, width)
        elif units:
            self._bars(t, kind, units, width)
        if kind == "neuron":
            memory_by_category(t, state, width)
        profile_line(t, state, width)
        errors = execution_text(state)
        if errors:
            t.append("\n  " + fmt.ellipsize(errors, width - 2), style="yellow")
        host = state.host
        if host is not None:
            t.append("\n")
            filled, empty = fmt.bar(host.memory_used / host.memory_total if host.memory_total else None, 20)
            t.append("  mem ")
            t.append(filled, style="magenta")
            t.append(empty, style="on grey19")
            t.append(f" {fmt.gib(host.memory_used)} / {fmt.gib(host.memory_total)} host")
            if host.cpu_percent is not None:
                t.append(f"   cpu {host.cpu_percent:.0f}% overall", style="dim")
            if host.swap_used:
                t.append(f"   swap {fmt.gib(host.swap_used)}", style="yellow")
        creep = figures(state, now).memory_creep  # a trend over the steady steps (core/findings/memory_creep.py)
        if creep is not None:
            t.append("\n  " + fmt.ellipsize(clean(creep.short), width - 2), style="bold yellow")
        if state.process_tree is not None and state.process_tree.compilers:
            c = state.process_tree.compilers
            t.append(f"\n  {len(c)} compiler process{'es' if len(c) > 1 else ''} running", style="yellow")
        self._cache(t, state, width)
        self._disks(t, state, width)
        # collector trouble (neuron-monitor restarting, a collector that stopped): shown, not fatal
        for n in [n for n in state.notices if n.level in ("warn", "error") and n.source != "probe"][-2:]:
            t.append("\n" + fmt.ellipsize(clean(f"{n.source}: {n.message}"), width), style="yellow")
        if state.reduce_errors:  # events the reducer skipped: the figures may miss them
            t.append("\n" + fmt.ellipsize(clean(state.reduce_error_text), width), style="yellow")
        self.query_one("#devices-text", Line).show(t)

    @staticmethod
    def _disks(t: Text, state: RunState, width: int) -> None:
        """The run folder's and the compile cache's disks: free, growth, when full; output not stored."""
        disk = state.parts.disk
        for f in disk.filesystems():
            for line in textwrap.wrap(clean(f.words()), max(20, width - 2), subsequent_indent="  ")[:3]:
                t.append("\n  " + line, style="yellow" if f.warning() else "dim")
        lost = disk.output_not_stored_words()
        if lost:
            for line in textwrap.wrap(clean(lost), max(20, width - 2), subsequent_indent="  ")[:4]:
                t.append("\n  " + line, style="bold red")

    @staticmethod
    def _cache(t: Text, state: RunState, width: int) -> None:
        """The Neuron compile cache, once it exists (or is remote): size, entries, free disk."""
        c = state.cache
        if c is None or not (c.exists or c.remote):
            return
        if c.remote:
            line = f"compile cache {c.path} (remote, not scanned)"
        else:
            entries = ", ".join(f"{v} {k}" for k, v in c.entries.items() if v)
            free = (f", {c.free_bytes / c.disk_total_bytes:.0%} disk free"
                    if c.free_bytes is not None and c.disk_total_bytes else "")
            line = f"compile cache {fmt.gib(c.size_bytes)}, {entries or 'empty'}{free} · {c.path}"
        t.append("\n" + fmt.ellipsize(clean(line), width), style="dim")
        for w in c.warnings:
            t.append("\n" + fmt.ellipsize(clean(w), width), style="yellow")
