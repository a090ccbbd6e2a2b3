"""Devices: per-core utilisation bars and memory — NeuronCores or GPUs when they are sampled,
else the host CPU per core and memory (and the panel says so)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.state import RunState
from neurondesk.views.console import fmt
from neurondesk.views.console.derived import device_units
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

    def render_state(self, state: RunState, now: float) -> None:
        samples = (id(state.neuron), id(state.gpu), id(state.host), id(state.process_tree), self.content_size)
        if samples == self._samples:
            return  # nothing new sampled since the last render
        self._samples = samples
        kind, units, note = device_units(state)
        t = Text()
        t.append(note, style="dim" if kind != "host" else "italic yellow")
        inv = state.inventory
        if kind == "host" and inv is not None and (inv.neuron_reason or inv.gpu_reason):
            why = "; ".join(r for r in (inv.neuron_reason, inv.gpu_reason) if r)
            t.append("\n" + fmt.ellipsize(why, max(20, self.content_size.width)), style="dim")
        width = max(30, self.content_size.width)
        if units:
            # as many columns as fit at ~34 cells each, so 32 NeuronCores stay within 8 lines
            cols = max(1, min(4, width // 34, (len(units) + 3) // 4 or 1))
            cell = width // cols
            bar_w = max(6, cell - 22 if kind != "host" else cell - 13)
            for i, u in enumerate(units):
                t.append("\n" if i % cols == 0 else "")
                filled, empty = fmt.bar(u.util, bar_w)
                t.append(f"{u.label:>5} ")
                t.append(filled, style=util_style(u.util))
                t.append(empty, style="on grey19")
                t.append(f" {fmt.pct(u.util, 0):>4}")
                if kind != "host":
                    t.append(f" {_mem(u.mem_used, u.mem_total):>9}", style="dim")
                t.append("  " if (i + 1) % cols else "")
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
        if state.process_tree is not None and state.process_tree.compilers:
            c = state.process_tree.compilers
            t.append(f"\n  {len(c)} compiler process{'es' if len(c) > 1 else ''} running", style="yellow")
        self.query_one("#devices-text", Line).show(t)
