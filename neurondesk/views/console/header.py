"""Header: the command, the device, the phase (with the live compile timer), elapsed and step."""

from __future__ import annotations

import shlex

from rich.text import Text

from neurondesk.core.reduce.state import RunState
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.derived import phase_text
from neurondesk.views.console.panel import Line

PHASE_STYLE = {
    "starting": "bold black on grey70",
    "compiling": "bold black on yellow",
    "running": "bold black on green",
    "input-bound": "bold white on dark_orange3",
    "hung": "bold white on red",
    "finished": "bold white on blue",
}


class HeaderBar(Line):
    def __init__(self, source_label: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.source_label = source_label

    def render_state(self, state: RunState, now: float) -> None:
        phase, words = phase_text(state, now)
        if phase == "finished" and state.exit_code not in (0, None):
            style = "bold white on red"
        else:
            style = PHASE_STYLE.get(phase, "bold")
        top = Text()
        top.append(" neurondesk ", style="bold reverse")
        top.append(" ")
        command = shlex.join(state.command) if state.command else "(waiting for the run to start)"
        room = self.size.width - 13
        label = self.source_label if len(self.source_label) + 2 <= room - 50 else ""
        top.append(fmt.ellipsize(clean(command), max(10, room - (len(label) + 2 if label else 0))), style="bold")
        if label:
            top.append(f"  {label}", style="italic dim")
        line = Text()
        line.append(f" {words} ", style=style)
        step = f"{state.steps_done:,}" + (f" / {state.steps_requested:,}" if state.steps_requested else "")
        device = state.device_kind or "device: not seen yet"
        if state.device_name:
            device += f" ({state.device_name})"
        if state.precision:
            device += f" {state.precision}"
        line.append("  elapsed ", style="dim")
        line.append(fmt.clock(state.elapsed_s(now)), style="bold")
        line.append("  step ", style="dim")
        line.append(step, style="bold")
        line.append("  ")
        line.append(clean(device), style="cyan")
        if state.instance_type or state.price_per_hour is not None:
            price = "" if state.price_per_hour is None else f" ${state.price_per_hour:,.4f}/h"
            line.append(f"  {state.instance_type or ''}{price}", style="dim")
        top.append("\n")
        top.append_text(line)
        self.show(top)
