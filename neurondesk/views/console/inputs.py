"""Input: the data-wait fraction of the step and its verdict, the workload's CPU, and its
DataLoader worker processes."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.reduce.steps import INPUT_BOUND, INPUT_WARN
from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.panel import Line, Panel, kv

VERDICT_STYLE = {"ok": "bold green", "warn": "bold yellow", "input-bound": "bold white on dark_orange3",
                 "unknown": "dim"}


class InputPanel(Panel):
    EVERY = 2
    NAME = "Input"
    KEY = "i"

    def compose(self) -> ComposeResult:
        yield Line(id="input-text")

    def on_mount(self) -> None:
        self.border_subtitle = f"warn ≥{INPUT_WARN:.0%} · input-bound ≥{INPUT_BOUND:.0%}"

    def render_view(self, view: RunView) -> None:
        inputs = view.inputs
        verdict, frac = inputs.verdict, view.figures.data_wait_fraction
        width = max(20, self.content_size.width)
        t = Text()
        t.append("data wait ", style="dim")
        t.append(fmt.pct(frac), style="bold")
        t.append(" of the step", style="dim")
        t.append("\n")
        t.append(f" {verdict} ", style=VERDICT_STYLE.get(verdict, ""))
        t.append(" ")
        filled, empty = fmt.bar(frac, max(4, width - len(verdict) - 3))
        t.append(filled, style="dark_orange3" if verdict == "input-bound" else "cyan")
        t.append(empty, style="on grey19")
        t.append("\n")
        t.append_text(kv(("last 20 steps", fmt.pct(inputs.recent_wait_fraction))))
        if inputs.hint:
            t.append("\n" + inputs.hint, style="yellow")
        tree = inputs.process_tree
        t.append("\n")
        if tree is None:
            t.append("workload processes: no samples yet", style="dim")
        else:
            t.append_text(kv(("workload CPU", f"{tree.total_cpu_percent:.0f}%"), ("RSS", fmt.gib(tree.total_rss))))
            t.append("\n")
            t.append_text(kv(("DataLoader workers", str(tree.dataloader_workers)),
                             ("CPU", f"{tree.dataloader_cpu_percent:.0f}%")))
            for p in tree.processes[:6]:
                line = f"{p.pid:>7} {p.role:<10} {p.cpu_percent:>4.0f}% {p.name}"
                t.append("\n" + fmt.ellipsize(clean(line), width), style="dim")
            if len(tree.processes) > 6:
                t.append(f"\n  … {len(tree.processes) - 6} more", style="dim")
        self.query_one("#input-text", Line).show(t)
