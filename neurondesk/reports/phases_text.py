"""The "Step phases" section of summary.md and of the HTML report: the steady step split into its
phases (summary.json's ``step_phases``, core/figures/phases.py's), the verdict's words, and with many ranks
each rank's verdict. Rendered only: every second, share and word is core's."""

from __future__ import annotations

import html

from neurondesk.core.figures.phases import LABELS, NAMES, StepPhases
from neurondesk.core.summary.types import Summary
from neurondesk.reports import fmt
from neurondesk.reports.html_svg import stacked_bar

RANKS_LISTED = 8


def _head(p: StepPhases) -> str:
    who = f"rank {p.rank}, " if p.rank is not None else ""
    mean = f", their mean {fmt.ms(p.mean_step_s)}" if p.mean_step_s is not None else ""
    return (f"the steady step of {fmt.ms(p.step_s)} by each phase's share of {p.steps:,} steady steps{mean} "
            f"({who}{p.backend}; a blank phase: the backend cannot tell it)")


def phase_rows(p: StepPhases) -> list[tuple[str, str, str]]:
    """(phase, seconds per step, share) for every phase, in NAMES' order; blank where null."""
    shares = {x.name: x.share for x in p.split}
    rows = []
    for n in NAMES:
        seconds = getattr(p, n)
        rows.append((LABELS[n], fmt.ms(seconds) if seconds is not None else "—",
                     fmt.pct(shares.get(n)) if seconds is not None else "—"))
    return rows


def _ranks(s: Summary) -> list[str]:
    by_rank = s.figures.step_phases_by_rank if s.figures is not None else []
    if len(by_rank) < 2:
        return []
    out = []
    for r in by_rank[:RANKS_LISTED]:
        top_name, top_share = (r.split[0].name, r.split[0].share) if r.split else (None, None)
        out.append(f"rank {r.rank}: {r.verdict}, {fmt.ms(r.step_s)}/step, largest "
                   f"{LABELS.get(top_name, top_name)} {fmt.pct(top_share)}")
    if len(by_rank) > RANKS_LISTED:
        out.append(f"… {len(by_rank) - RANKS_LISTED} more ranks (summary.json: figures.step_phases_by_rank)")
    return out


def phases_markdown(s: Summary) -> list[str]:
    p = s.step_phases
    if p is None:
        return []
    lines = ["", "## Step phases", "", f"**{p.verdict}** — {p.words}", "", _head(p), "",
             "| phase | per step | share |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in phase_rows(p)]
    ranks = _ranks(s)
    if ranks:
        lines += ["", *(f"- {x}" for x in ranks)]
    return lines


def phases_html(s: Summary) -> str:
    p = s.step_phases
    if p is None:
        return ""
    e = html.escape
    bar = stacked_bar([(LABELS.get(x.name, x.name), x.share, f"{fmt.ms(x.seconds)} · {fmt.pct(x.share)}")
                       for x in p.split if x.seconds > 0])
    rows = "".join(f"<tr><td>{e(a)}</td><td class=num>{e(b)}</td><td class=num>{e(c)}</td></tr>"
                   for a, b, c in phase_rows(p))
    ranks = "".join(f"<li>{e(x)}</li>" for x in _ranks(s))
    return (f'<h3>Step phases</h3><p id="step-verdict"><b>{e(p.verdict)}</b> — {e(p.words)}</p>'
            f"<p class=\"empty\">{e(_head(p))}</p>{bar}"
            f"<table><thead><tr><th>phase</th><th>per step</th><th>share</th></tr></thead><tbody>{rows}</tbody></table>"
            + (f"<ul>{ranks}</ul>" if ranks else ""))
