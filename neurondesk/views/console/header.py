"""Header: the command, the device, the phase (with the live compile timer), elapsed and step."""

from __future__ import annotations

import shlex

from rich.text import Text

from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.panel import Line

PHASE_STYLE = {
    "starting": "bold black on grey70",
    "compiling": "bold black on yellow",
    "running": "bold black on green",
    "input-bound": "bold white on dark_orange3",
    "hung": "bold white on red",
    "finished": "bold white on blue",
}


def phase_words(view: RunView) -> str:
    """The phase in words; while a compile runs, its live wall timer: 'compiling #3 — 0:42 and counting'."""
    c = view.open_compile
    if view.pulse.phase == "compiling" and c is not None and not view.pulse.phase_words.startswith("compiling NEFFs"):
        # TorchNeuron's eager NEFFs say their own count and wall (core/reduce/compile/neff.py)
        return f"compiling #{c.number} — {fmt.clock(c.open_s)} and counting"
    return view.pulse.phase_words


class HeaderBar(Line):
    def __init__(self, source_label: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.source_label = source_label

    def render_view(self, view: RunView) -> None:
        run, f, phase = view.header, view.figures, view.pulse.phase
        if phase == "finished" and run.exit_code not in (0, None):
            style = "bold white on red"
        else:
            style = PHASE_STYLE.get(phase, "bold")
        top = Text()
        top.append(" neurondesk ", style="bold reverse")
        top.append(" ")
        command = shlex.join(run.command) if run.command else "(waiting for the run to start)"
        room = self.size.width - 13
        label = self.source_label if len(self.source_label) + 2 <= room - 50 else ""
        top.append(fmt.ellipsize(clean(command), max(10, room - (len(label) + 2 if label else 0))), style="bold")
        if label:
            top.append(f"  {label}", style="italic dim")
        line = Text()
        line.append(f" {phase_words(view)} ", style=style)
        step = f"{f.steps:,}" + (f" / {f.steps_requested:,}" if f.steps_requested else "")
        device = run.device_kind or "device: not seen yet"
        if run.device_name:
            device += f" ({run.device_name})"
        if run.precision:
            device += f" {run.precision}"
        line.append("  elapsed ", style="dim")
        line.append(fmt.clock(f.elapsed_s), style="bold")
        line.append("  step ", style="dim")
        line.append(step, style="bold")
        line.append("  ")
        line.append(clean(device), style="cyan")
        if run.instance_type or f.price_per_hour is not None:
            price = "" if f.price_per_hour is None else f" ${f.price_per_hour:,.4f}/h"
            line.append(f"  {run.instance_type or ''}{price}", style="dim")
        top.append("\n")
        top.append_text(line)
        self.show(top)
