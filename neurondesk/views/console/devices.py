"""Devices: per-core utilisation bars and memory — NeuronCores or GPUs when they are sampled,
else the host CPU per core and memory (and the panel says so). What it shows is the frame's
RunView (core/view/devices_view.py); it only draws."""

from __future__ import annotations

import textwrap

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.view.devices_view import CompileCache, DevicesView, HostMemory, Unit
from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
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


MAX_ROWS = 8  # bars are laid out in columns so that at most this many rows are used
LEVELS = " ▁▂▃▄▅▆▇█"


class DevicesPanel(Panel):
    NAME = "Devices"
    KEY = "d"

    def compose(self) -> ComposeResult:
        yield Line(id="devices-text")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._drawn: tuple = ()  # (section, size) of the last render

    def invalidate(self) -> None:
        super().invalidate()
        self._drawn = ()

    @staticmethod
    def _bars(t: Text, d: DevicesView, width: int) -> None:
        """One bar per unit, in as many columns as keep it within MAX_ROWS rows; each unit's
        memory beside its bar when there is room, else the sum below them."""
        kind, units = d.kind, d.units
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
            what = {"neuron": "NeuronCores", "gpu": "GPUs"}.get(kind, kind)
            t.append(f"\n  device memory {_mem(d.memory_used, d.memory_total)} over {len(units)} {what}", style="dim")

    @staticmethod
    def _spark(t: Text, units: tuple[Unit, ...], width: int) -> None:
        """Many units (a 128-vCPU host): one cell per unit, its height the utilisation."""
        per_line = max(16, min(64, width - 12))
        for start in range(0, len(units), per_line):
            chunk = units[start:start + per_line]
            t.append(f"\n{start:>4}-{start + len(chunk) - 1:<4} ", style="dim")
            for u in chunk:
                level = 0 if u.util is None else round(max(0.0, min(1.0, u.util)) * 8)
                t.append(LEVELS[level], style=util_style(u.util) + " on grey19")

    def render_view(self, view: RunView) -> None:
        d = view.devices
        drawn = (d, self.content_size)
        if self._drawn and self._drawn[0] is d and self._drawn[1] == self.content_size:
            return  # nothing new sampled since the last render
        self._drawn = drawn
        t = Text()
        t.append(d.note, style="dim" if d.kind != "host" else "italic yellow")
        if d.hardware:
            t.append(" · " + d.hardware, style="dim")
        if d.unsampled_why:
            t.append("\n" + fmt.ellipsize(clean(d.unsampled_why), max(20, self.content_size.width)), style="dim")
        width = max(30, self.content_size.width)
        if len(d.units) > MAX_ROWS * 4:
            self._spark(t, d.units, width)
        elif d.units:
            self._bars(t, d, width)
        if d.neuron_memory is not None:
            memory_by_category(t, d.neuron_memory, width)
        if d.torchneuron_memory:  # TorchNeuron's allocator, per rank (core/view/devices_view.torchneuron_lines)
            t.append("\n  device memory (TorchNeuron's allocator)", style="bold")
            for line in d.torchneuron_memory:
                t.append("\n  " + fmt.ellipsize(clean(line), width - 2), style="yellow" if "OOM" in line else "dim")
        profile_line(t, d.profile, width)
        if d.execution_errors:
            t.append("\n  " + fmt.ellipsize(d.execution_errors, width - 2), style="yellow")
        if d.host is not None:
            self._host(t, d.host)
        if d.memory_creep is not None:  # a trend over the steady steps (core/findings/memory_creep.py)
            t.append("\n  " + fmt.ellipsize(clean(d.memory_creep), width - 2), style="bold yellow")
        if d.compilers:
            t.append(f"\n  {d.compilers} compiler process{'es' if d.compilers > 1 else ''} running", style="yellow")
        if d.compile_wall is not None:  # host memory emptied by the compile wall (core/node/compile_wall.py)
            for line in textwrap.wrap(clean(d.compile_wall.words), max(20, width - 2), subsequent_indent="  ")[:4]:
                t.append("\n  " + line, style="bold yellow")
        if d.cache is not None:
            self._cache(t, d.cache, width)
        self._disks(t, d, width)
        # collector trouble (neuron-monitor restarting, a collector that stopped): shown, not fatal
        for notice in d.collector_notices:
            t.append("\n" + fmt.ellipsize(clean(notice), width), style="yellow")
        if d.reduce_errors:  # events the reducer skipped: the figures may miss them
            t.append("\n" + fmt.ellipsize(clean(d.reduce_errors), width), style="yellow")
        self.query_one("#devices-text", Line).show(t)

    @staticmethod
    def _host(t: Text, host: HostMemory) -> None:
        t.append("\n")
        filled, empty = fmt.bar(host.used_fraction, 20)
        t.append("  mem ")
        t.append(filled, style="magenta")
        t.append(empty, style="on grey19")
        t.append(f" {fmt.gib(host.used)} / {fmt.gib(host.total)} host")
        if host.cpu_percent is not None:
            t.append(f"   cpu {host.cpu_percent:.0f}% overall", style="dim")
        if host.swap_used:
            t.append(f"   swap {fmt.gib(host.swap_used)}", style="yellow")

    @staticmethod
    def _disks(t: Text, d: DevicesView, width: int) -> None:
        """The run folder's and the compile cache's disks: free, growth, when full; output not stored."""
        for disk in d.disks:
            for line in textwrap.wrap(clean(disk.words), max(20, width - 2), subsequent_indent="  ")[:3]:
                t.append("\n  " + line, style="yellow" if disk.warning else "dim")
        if d.output_not_stored:
            for line in textwrap.wrap(clean(d.output_not_stored), max(20, width - 2), subsequent_indent="  ")[:4]:
                t.append("\n  " + line, style="bold red")

    @staticmethod
    def _cache(t: Text, c: CompileCache, width: int) -> None:
        """The Neuron compile cache, once it exists (or is remote): size, entries, free disk."""
        if c.remote:
            line = f"compile cache {c.path} (remote, not scanned)"
        else:
            entries = ", ".join(f"{v} {k}" for k, v in c.entries)
            free = f", {c.disk_free_fraction:.0%} disk free" if c.disk_free_fraction is not None else ""
            line = f"compile cache {fmt.gib(c.size_bytes)}, {entries or 'empty'}{free} · {c.path}"
        t.append("\n" + fmt.ellipsize(clean(line), width), style="dim")
        for w in c.warnings:
            t.append("\n" + fmt.ellipsize(clean(w), width), style="yellow")
