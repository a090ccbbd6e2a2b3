"""Advice and the time breakdown drawn for the console: the advice lines of the Compiles panel and
the stacked bar of where the time (and the money) went. Renders what core computed; no figure is
made here."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from neurondesk.core.figures.time_breakdown import TimeSlice
from neurondesk.core.summary import types as st
from neurondesk.reports import fmt
from neurondesk.reports.advice_text import KIND_TITLE
from neurondesk.reports.safe_text import clean

# one colour per slice of the breakdown (start-up, compile, training, data wait, evaluation, gaps, tear-down)
SLICE_STYLE = {"start-up": "blue", "compile": "red", "training": "green", "data wait": "yellow",
               "evaluation": "magenta", "gaps": "bright_black", "tear-down": "cyan"}


def advice_lines(advice: list[dict]) -> Text:
    """The advice shown in a panel: one wrapped paragraph each, the kind in bold."""
    t = Text()
    for i, a in enumerate(advice):
        if i:
            t.append("\n")
        t.append("▶ " + KIND_TITLE.get(a["kind"], a["kind"]) + ": ", style="bold yellow")
        message = a["message"]
        if a.get("location"):  # the panel is narrow: the file name and line say where
            message = message.replace(a["location"], fmt.short_location(a["location"]))
        t.append(clean(message))
    return t


Slices = Sequence[TimeSlice] | Sequence[st.TimeSlice]  # core's, live; or the summary's: the same four fields


def breakdown_bar(slices: Slices, width: int) -> Text:
    """One line of coloured segments, each as wide as its share of the wall time (a slice with
    any time gets at least one cell), then a legend line per slice: name, seconds, share, $."""
    width = max(10, width)
    shown = [x for x in slices if x.share and x.seconds > 0]
    t = Text()
    if not shown:
        t.append("no time recorded yet", style="dim")
        return t
    cells = [max(1, round(x.share * width)) for x in shown]
    while sum(cells) > width:  # rounding up the small ones: take it back from the widest
        cells[cells.index(max(cells))] -= 1
    if sum(cells) < width:
        cells[cells.index(max(cells))] += width - sum(cells)
    for x, n in zip(shown, cells, strict=True):
        t.append("█" * n, style=SLICE_STYLE.get(x.name, "white"))
    return t


def breakdown_legend(slices: Slices, width: int = 80) -> Text:
    """Name, seconds, share and $ of each slice with time in it, its colour as a square, in as many
    columns as fit in ``width``. Narrower than one such entry (a panel in the grid): name and share
    of the slices over 1% of the time, two to a line, and how many smaller ones the bar also holds."""
    shown = [x for x in slices if x.seconds > 0]
    full = (width + 2) // 39
    small = 0
    if not full:
        small = sum(1 for x in shown if (x.share or 0) < 0.01)
        shown = [x for x in shown if (x.share or 0) >= 0.01]
    columns = full or max(1, (width + 1) // 18)
    t = Text()
    for i, x in enumerate(shown):
        if i:
            t.append("\n" if i % columns == 0 else (" " if not full else "  "))
        t.append("■ ", style=SLICE_STYLE.get(x.name, "white"))
        if not full:
            t.append(f"{x.name:<10}", style="dim")
            t.append(f"{fmt.pct(x.share):>5}")
            continue
        t.append(f"{x.name:<11}", style="dim")
        t.append(f"{fmt.secs(x.seconds):>8} {fmt.pct(x.share):>6}")
        t.append(f" {fmt.usd(x.usd):>8}" if x.usd is not None else " " * 9)
    if small and len(shown) % columns:
        t.append(f"  +{small} under 1%", style="dim")
    return t
