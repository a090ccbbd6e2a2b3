"""The budget (``--budget-usd``): how much of it is spent and when the rest will be. Pure.

spent = cost so far (price / 3600 x wall seconds: the whole run is paid, compiles included).
The rest is reached in (budget - spent) / (price / 3600) seconds of wall time, and at
steps done + that time / the steady step time (the job's: the slowest rank's median). A compile
still to come makes the real step lower; unpriced runs and runs without a steady step say
"unknown", never a made-up figure.

Levels: "ok" under 80%, "warn" from 80%, "reached" at 100%; "unpriced" without a price.
A run's budget figures are part of its figures (core/figures/run_figures.py: ``run_figures(...).budget``,
``budget_for_state``), priced at the same step time as every other figure.
"""

from __future__ import annotations

import msgspec

from neurondesk.core.figures.cost import cost_so_far
from neurondesk.core.node.disk import duration_words

WARN_AT = 0.80


class BudgetFigures(msgspec.Struct, frozen=True, kw_only=True):
    budget_usd: float
    spent_usd: float | None  # None: the run has no price
    fraction: float | None  # spent / budget
    level: str  # "unpriced" | "ok" | "warn" | "reached"
    reach_in_s: float | None  # wall seconds until the budget is spent (None: reached, finished or unpriced)
    reach_at_step: int | None  # the step it is spent at, at the steady pace (None: no steady step yet)

    def words(self) -> str:
        """E.g. "$12.30 of $50.00 (25%); reached at step 41,200, in about 2 h"."""
        if self.spent_usd is None or self.fraction is None:
            return f"budget ${self.budget_usd:,.2f}: unknown (the run has no price)"
        head = f"${self.spent_usd:,.2f} of ${self.budget_usd:,.2f} ({self.fraction * 100:.0f}%)"
        if self.level == "reached":
            return f"{head}: budget reached"
        if self.reach_in_s is None:
            return head
        at = f"at step {self.reach_at_step:,}, " if self.reach_at_step is not None else ""
        return f"{head}; reached {at}in about {duration_words(self.reach_in_s)}"


def budget_figures(budget_usd: float, price_per_hour: float | None, elapsed_s: float, steps_done: int,
                   step_time_s: float | None, finished: bool = False) -> BudgetFigures:
    spent = cost_so_far(price_per_hour, elapsed_s)
    if spent is None or not price_per_hour or budget_usd <= 0:
        return BudgetFigures(budget_usd=budget_usd, spent_usd=spent, fraction=None, level="unpriced",
                             reach_in_s=None, reach_at_step=None)
    fraction = spent / budget_usd
    level = "reached" if fraction >= 1.0 else "warn" if fraction >= WARN_AT else "ok"
    reach_in = at_step = None
    if level != "reached" and not finished:
        reach_in = (budget_usd - spent) / (price_per_hour / 3600.0)
        if step_time_s is not None and step_time_s > 0:
            at_step = steps_done + int(reach_in / step_time_s)
    return BudgetFigures(budget_usd=budget_usd, spent_usd=spent, fraction=fraction, level=level,
                         reach_in_s=reach_in, reach_at_step=at_step)
