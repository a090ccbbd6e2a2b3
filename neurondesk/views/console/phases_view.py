"""The step split into its phases, as the Throughput panel shows it: the steady split as one stacked
bar with its legend and the verdict's words (core/figures/phases.py's StepPhases, read from RunFigures), and
the lead's recent steps as stacked columns, one a step (core/phases.recent_step_bars). Only drawn
here: the seconds, shares and words are core's."""

from __future__ import annotations

import textwrap

from rich.text import Text

from neurondesk.core.figures.phases import LABELS, PhaseShare, StepBar, StepPhases
from neurondesk.reports import fmt

COLORS = {"input_wait": "dark_orange3", "h2d": "magenta", "forward": "cyan", "backward": "blue",
          "optimizer": "green", "collective": "red", "host_tracing": "cyan", "device_wait": "blue",
          "other": "grey50"}
VERDICT_STYLE = {"compute-bound": "bold green", "input-bound": "bold white on dark_orange3"}
BLOCKS = " ▁▂▃▄▅▆▇█"
COLUMN_ROWS = 3  # the recent steps' columns: 3 rows of 8 levels
FULL_FROM_ROWS = 24  # a panel this tall (or alone, in a tab) shows the whole split and the recent steps' columns


def cells(parts: list[PhaseShare], width: int) -> list[str]:
    """The phase of each of ``width`` cells of a bar of the shares (largest remainders: the cells
    add up to the width when the shares add up to 1)."""
    exact = [(p.name, max(0.0, p.share) * width) for p in parts]
    counts = {name: int(x) for name, x in exact}
    left = width - sum(counts.values())
    for name, _ in sorted(exact, key=lambda nx: -(nx[1] - int(nx[1])))[:max(0, left)]:
        counts[name] += 1
    return [name for name, _ in exact for _ in range(counts[name])]


def split_text(p: StepPhases, width: int, compact: bool = False, legend: bool = True) -> Text:
    """The split: a title, the bar, the legend, the verdict's words. ``compact`` (a panel in the
    grid, beside the charts): the bar and the verdict on one line, the legend's shares on one (none
    without ``legend``: a panel too short for it), the words on at most two."""
    t = Text()
    tag = f" {p.verdict} "
    if compact:
        t.append("phases ", style="bold")
        bar_width = max(10, width - len("phases ") - len(tag) - 1)
    else:
        t.append("step phases ", style="bold")
        t.append(tag, style=VERDICT_STYLE.get(p.verdict or "", "bold yellow"))
        who = f"rank {p.rank}, " if p.rank is not None else ""
        t.append(f" {fmt.ms(p.step_s)}/step: shares of {p.steps:,} steady steps ({who}{p.backend})\n", style="dim")
        bar_width = max(10, width)
    for name in cells(p.split, bar_width):
        t.append("█", style=COLORS.get(name, ""))
    if compact:
        t.append(" ")
        t.append(tag, style=VERDICT_STYLE.get(p.verdict or "", "bold yellow"))
    key = Text()
    for i, s in enumerate(x for x in p.split if x.seconds > 0):  # a phase measured at 0 (no collective): left out
        if i:
            key.append("  ")
        key.append("■ ", style=COLORS.get(s.name, ""))
        key.append(f"{LABELS.get(s.name, s.name)} {fmt.pct(s.share)}" + ("" if compact else f" {fmt.ms(s.seconds)}"))
    if compact:
        key.truncate(width, overflow="ellipsis")
    if legend:
        t.append("\n")
        t.append_text(key)
    if p.words:
        words = p.words
        if compact:  # two lines at most
            lines = textwrap.wrap(words, max(10, width))
            words = "\n".join(lines[:2]) if len(lines) <= 2 else lines[0] + "\n" + lines[1][:max(1, width - 1)] + "…"
        t.append("\n" + words, style="green" if p.verdict == "compute-bound" else "yellow")
    return t


def columns_text(bars: list[StepBar], width: int) -> Text:
    """The recent steps as stacked columns (COLUMN_ROWS high, scaled to the tallest), the first
    phase of a step at the bottom; a step the probe did not split is grey."""
    bars = bars[-max(1, width - 12):]
    top = max((b.duration_s for b in bars), default=0.0) or 1.0
    levels = COLUMN_ROWS * 8
    t = Text()
    for row in reversed(range(COLUMN_ROWS)):
        t.append("last steps  " if row == COLUMN_ROWS - 1 else f"{fmt.ms(top) if row == COLUMN_ROWS - 2 else '':>10}  ",
                 style="dim")
        lo = row * 8
        for b in bars:
            height = round(b.duration_s / top * levels)
            fill = min(8, max(0, height - lo))
            t.append(BLOCKS[fill], style=_cell_style(b, lo, min(height, lo + 8), top / levels))
        if row:
            t.append("\n")
    return t


def _cell_style(b: StepBar, lo: int, hi: int, per_level: float) -> str:
    """The phase covering most of levels [lo, hi) of a step's column."""
    if hi <= lo:
        return ""
    if not b.parts:
        return "grey35"
    a, z = lo * per_level, hi * per_level
    best, most, at = "", -1.0, 0.0
    for p in b.parts:
        overlap = min(z, at + p.seconds) - max(a, at)
        if overlap > most:
            best, most = p.name, overlap
        at += p.seconds
    return COLORS.get(best, "") + ("" if b.steady else " dim")
