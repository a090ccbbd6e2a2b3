"""Input: the data-wait fraction of the step and its verdict, the workload's CPU, and its
DataLoader worker processes."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.state import INPUT_BOUND, INPUT_WARN, RunState
from neurondesk.views.console import fmt
from neurondesk.views.console.panel import Line, Panel, kv

VERDICT_STYLE = {"ok": "bold green", "warn": "bold yellow", "input-bound": "bold white on dark_orange3",
                 "unknown": "dim"}


class InputPanel(Panel):
    EVERY = 2
    NAME = "Input"
    KEY = "i"

    def compose(self) -> ComposeResult:
        yield Line(id="input-text")

    def render_state(self, state: RunState, now: float) -> None:
        verdict = state.input_verdict()
        frac = state.data_wait_fraction
        t = Text()
        t.append("data wait ", style="dim")
        t.append(fmt.pct(frac), style="bold")
        t.append(" of the step  ")
        t.append(f" {verdict} ", style=VERDICT_STYLE.get(verdict, ""))
        t.append("\n")
        filled, empty = fmt.bar(frac, 12)
        t.append(filled, style="dark_orange3" if verdict == "input-bound" else "cyan")
        t.append(empty, style="on grey19")
        t.append(f" warn ≥{INPUT_WARN:.0%} bound ≥{INPUT_BOUND:.0%}", style="dim")
        recent = state.recent_data_wait_fraction()
        t.append("\n")
        t.append_text(kv(("last 20 steps", fmt.pct(recent)),
                         ("over", "steady steps" if state.steady_times else "all steps")))
        tree = state.process_tree
        t.append("\n")
        if tree is None:
            t.append("workload processes: no samples yet", style="dim")
        else:
            t.append_text(kv(("workload CPU", f"{tree.total_cpu_percent:.0f}%"),
                             ("RSS", fmt.gib(tree.total_rss))))
            t.append("\n")
            t.append_text(kv(("DataLoader workers", str(tree.dataloader_workers)),
                             ("their CPU", f"{tree.dataloader_cpu_percent:.0f}%")))
            for p in tree.processes[:6]:
                t.append(f"\n  {p.get('pid', '?'):>7} {p.get('role', '?'):<10} "
                         f"{p.get('cpu_percent', 0):>5.0f}%  {p.get('name', '')}", style="dim")
            if len(tree.processes) > 6:
                t.append(f"\n  … {len(tree.processes) - 6} more", style="dim")
        self.query_one("#input-text", Line).show(t)
