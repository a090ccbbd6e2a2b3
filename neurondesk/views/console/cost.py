"""Cost: $/hr and its source, cost so far, $/1k steps (steady and all-in), $/1M tokens, compile
share, and the projected cost of the requested steps, the budget (core/figures/run_figures.py computes every
figure; this panel shows them); where the
time and the money went so far, as a stacked bar (core.time_breakdown)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.views.console.advice_panels import breakdown_bar, breakdown_legend
from neurondesk.views.console.panel import Line, Panel

BUDGET_STYLE = {"warn": "bold yellow", "reached": "bold red"}


class CostPanel(Panel):
    EVERY = 2
    NAME = "Cost"
    KEY = "$"
    TIME_DEPENDENT = True  # cost so far grows with the wall clock

    def compose(self) -> ComposeResult:
        yield Line(id="cost-text")
        yield Line(id="cost-breakdown")

    def render_view(self, view: RunView) -> None:
        c = view.figures
        t = Text()
        said = view.header.price_source  # where the price is from, or (none) in one line how to give one
        ask = None
        if c.price_per_hour is None:
            ask = said if said and said.startswith("no price") else "no price: give --instance-type or --price-per-hour"
            t.append(ask + "\n", style="yellow")  # whole: it says what to do (SOURCE_WIDTH bounds it)
        rows = [
            ("$/hour", fmt.usd(c.price_per_hour)),
            ("so far", fmt.usd(c.total_usd)),
            ("$/1k steps steady", fmt.usd(c.per_1k_steps_steady_usd)),
            ("$/1k steps all-in", fmt.usd(c.per_1k_steps_all_in_usd)),
            ("$/1M tokens", fmt.usd(c.per_million_tokens_usd)),
            ("compile share", fmt.pct(c.compile_share_of_cost)),  # of the bill: none without a price
            ("MFU", fmt.pct(c.mfu)),
        ]
        if c.steps_requested:
            rows.append((f"projected {c.steps_requested:,}", fmt.usd(c.projected_usd)))
        for i, (label, value) in enumerate(rows):
            t.append(f"{label:<20}", style="dim")
            t.append(value, style="bold" if label in ("so far", "$/1k steps steady") else "")
            if i < len(rows) - 1:
                t.append("\n")
        budget = c.budget
        if budget is not None:  # "$12.30 of $50.00 (25%); reached at step 41,200, in about 2 h"
            t.append("\n")
            t.append(f"{'budget':<20}", style="dim")
            t.append(budget.words(), style=BUDGET_STYLE.get(budget.level, ""))
        source = " · ".join(x for x in (view.header.instance_type, said) if x and x != ask)
        if source:
            t.append("\n")
            t.append(fmt.ellipsize(source, max(20, self.content_size.width * 2 - 1)), style="dim italic")
        self.query_one("#cost-text", Line).show(t)
        slices = view.time_breakdown
        width = self.content_size.width or 36
        b = Text("time ", style="dim")  # where the time (and the money) went
        b.append_text(breakdown_bar(slices, width - 5))
        b.append("\n")
        b.append_text(breakdown_legend(slices, width))
        self.query_one("#cost-breakdown", Line).show(b)
