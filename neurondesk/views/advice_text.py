"""Advice and the time breakdown, rendered: the words of `neurondesk advise`, the advice lines of
the Compiles panel, and the stacked bar of where the time (and the money) went.

Renders what core.advice and core.time_breakdown computed (as summary dicts); no figure is
made here.
"""

from __future__ import annotations

from rich.text import Text

from neurondesk.views import fmt
from neurondesk.views.safe_text import clean

KIND_TITLE = {"shape-buckets": "shape buckets", "value-access": "value read inside the step",
              "graph-split": "step split into several graphs", "graph-grows": "graph grows every step"}
# one colour per slice of the breakdown (start-up, compile, training, data wait, evaluation, gaps, tear-down)
SLICE_STYLE = {"start-up": "blue", "compile": "red", "training": "green", "data wait": "yellow",
               "evaluation": "magenta", "gaps": "bright_black", "tear-down": "cyan"}


def advice_text(advice: list[dict]) -> str:
    """`neurondesk advise`'s words: each piece of advice, and for shape buckets every plan costed."""
    if not advice:
        return "no advice: nothing in this run that a change at a line of the script would clearly save\n"
    out: list[str] = []
    for i, a in enumerate(advice, 1):
        out.append(f"{i}. {KIND_TITLE.get(a['kind'], a['kind'])}" + (f" at {a['location']}" if a.get("location") else ""))
        out.append(f"   {a['message']}")
        if a["kind"] == "shape-buckets":
            values = a.get("values") or {}
            out.append(f"   dim {a['dimension']}: {len(values)} distinct values over {sum(values.values()):,} steps "
                       f"({min(map(int, values))}..{max(map(int, values))}); {a['graphs_today']} graphs today, "
                       f"mean compile {fmt.secs(a['mean_compile_s'], 2)}")
            out.append(f"   {'plan':<16}{'buckets':<24}{'graphs':>7}{'padded':>8}{'compile saved':>15}"
                       f"{'steps slower':>14}{'net saved':>11}")
            for p in a.get("plans") or []:
                mark = " ◀" if p == a.get("proposed") else ""
                buckets = "{" + ", ".join(map(str, p["buckets"])) + "}"
                out.append(f"   {p['label']:<16}{fmt.ellipsize(buckets, 23):<24}{p['graphs']:>7}"
                           f"{fmt.pct(p['padded_share'], 0):>8}{fmt.secs(p['compile_saved_s']):>15}"
                           f"{fmt.secs(p['step_time_added_s']):>14}{fmt.secs(p['net_saved_s']):>11}{mark}")
        out.append("")
    return "\n".join(out)


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


def breakdown_bar(slices: list[dict], width: int) -> Text:
    """One line of coloured segments, each as wide as its share of the wall time (a slice with
    any time gets at least one cell), then a legend line per slice: name, seconds, share, $."""
    width = max(10, width)
    shown = [x for x in slices if x.get("share") and x["seconds"] > 0]
    t = Text()
    if not shown:
        t.append("no time recorded yet", style="dim")
        return t
    cells = [max(1, round(x["share"] * width)) for x in shown]
    while sum(cells) > width:  # rounding up the small ones: take it back from the widest
        cells[cells.index(max(cells))] -= 1
    if sum(cells) < width:
        cells[cells.index(max(cells))] += width - sum(cells)
    for x, n in zip(shown, cells, strict=True):
        t.append("█" * n, style=SLICE_STYLE.get(x["name"], "white"))
    return t


def breakdown_legend(slices: list[dict], width: int = 80) -> Text:
    """Name, seconds, share and $ of each slice with time in it, its colour as a square, in as many
    columns as fit in ``width``. Narrower than one such entry (a panel in the grid): name and share
    of the slices over 1% of the time, two to a line, and how many smaller ones the bar also holds."""
    shown = [x for x in slices if x["seconds"] > 0]
    full = (width + 2) // 39
    small = 0
    if not full:
        small = sum(1 for x in shown if (x["share"] or 0) < 0.01)
        shown = [x for x in shown if (x["share"] or 0) >= 0.01]
    columns = full or max(1, (width + 1) // 18)
    t = Text()
    for i, x in enumerate(shown):
        if i:
            t.append("\n" if i % columns == 0 else (" " if not full else "  "))
        t.append("■ ", style=SLICE_STYLE.get(x["name"], "white"))
        if not full:
            t.append(f"{x['name']:<10}", style="dim")
            t.append(f"{fmt.pct(x['share']):>5}")
            continue
        t.append(f"{x['name']:<11}", style="dim")
        t.append(f"{fmt.secs(x['seconds']):>8} {fmt.pct(x['share']):>6}")
        t.append(f" {fmt.usd(x['usd']):>8}" if x.get("usd") is not None else " " * 9)
    if small and len(shown) % columns:
        t.append(f"  +{small} under 1%", style="dim")
    return t
