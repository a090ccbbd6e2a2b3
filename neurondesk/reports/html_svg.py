"""Inline SVG for the HTML report: a line chart and a stacked bar. Strings only; nothing computed
but where a given point is drawn."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

W, H = 760, 220
PAD_L, PAD_R, PAD_T, PAD_B = 64, 16, 14, 30
COLORS = ("#2563eb", "#f59e0b", "#dc2626", "#16a34a", "#7c3aed", "#0891b2", "#db2777", "#65a30d")


@dataclass
class Line:
    label: str
    xs: list[float]
    ys: list[float]
    color: str = COLORS[0]
    dashed: bool = False


@dataclass
class Chart:
    title: str
    y_unit: str  # "ms", "loss" ...
    lines: list[Line] = field(default_factory=list)
    marks: list[tuple[float, float]] = field(default_factory=list)  # (x, y) drawn as dots: compile steps
    mark_label: str = ""
    clip_marks: bool = False  # the scale is the lines': marks above it are drawn at the top edge


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}"


def line_chart(c: Chart) -> str:
    """An SVG line chart; an empty chart says there is nothing to draw."""
    pts = [(x, y) for ln in c.lines for x, y in zip(ln.xs, ln.ys, strict=False) if math.isfinite(y)]
    if not (c.clip_marks and pts):
        pts += [(x, y) for x, y in c.marks if math.isfinite(y)]
    else:  # the marks still widen the x range
        pts += [(x, min(p[1] for p in pts)) for x, _ in c.marks]
    title = html.escape(c.title)
    if not pts:
        return f'<p class="empty">{title}: nothing to draw</p>'
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0) * (W - PAD_L - PAD_R)

    def sy(y: float) -> float:
        return H - PAD_B - (y - y0) / (y1 - y0) * (H - PAD_T - PAD_B)

    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{title}">',
           f'<title>{title}</title>']
    for t in _ticks(y0, y1):
        out.append(f'<line class="grid" x1="{PAD_L}" x2="{W - PAD_R}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>'
                   f'<text class="tick" x="{PAD_L - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    for t in _ticks(x0, x1, 6):
        out.append(f'<text class="tick" x="{sx(t):.1f}" y="{H - 10}" text-anchor="middle">{_label(t)}</text>')
    out.append(f'<text class="unit" x="8" y="{PAD_T + 4}">{html.escape(c.y_unit)}</text>')
    for ln in c.lines:
        xy = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(ln.xs, ln.ys, strict=False) if math.isfinite(y))
        dash = ' stroke-dasharray="4 3"' if ln.dashed else ""
        out.append(f'<polyline fill="none" stroke="{ln.color}" stroke-width="1.5"{dash} points="{xy}">'
                   f'<title>{html.escape(ln.label)}</title></polyline>')
    for x, y in c.marks:
        out.append(f'<circle class="mark" cx="{sx(x):.1f}" cy="{max(sy(y), PAD_T):.1f}" r="3">'
                   f'<title>{html.escape(c.mark_label)} {_label(x)}: {_label(y)}</title></circle>')
    out.append("</svg>")
    legend = "".join(f'<span><i style="background:{ln.color}"></i>{html.escape(ln.label)}</span>' for ln in c.lines)
    if c.marks:
        legend += f'<span><i class="dot"></i>{html.escape(c.mark_label)}</span>'
    return "".join(out) + f'<div class="legend">{legend}</div>'


def stacked_bar(parts: list[tuple[str, float, str]]) -> str:
    """(name, share 0..1, words) per slice, as one horizontal bar with a title per slice."""
    x = 0.0
    out = ['<svg class="bar" viewBox="0 0 1000 28" preserveAspectRatio="none" role="img" aria-label="time breakdown">']
    for i, (name, share, words) in enumerate(parts):
        w = max(0.0, share) * 1000
        out.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="28" fill="{COLORS[i % len(COLORS)]}">'
                   f'<title>{html.escape(name)}: {html.escape(words)}</title></rect>')
        x += w
    out.append("</svg>")
    legend = "".join(f'<span><i style="background:{COLORS[i % len(COLORS)]}"></i>{html.escape(n)} {html.escape(w)}</span>'
                     for i, (n, _, w) in enumerate(parts))
    return "".join(out) + f'<div class="legend">{legend}</div>'
