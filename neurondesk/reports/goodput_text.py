"""Goodput in words, from a summary's typed ``goodput`` (core/figures/goodput.py computes every number):
the summary's row, the disruptions' lines, summary.md's section. A summary written before goodput has none."""

from __future__ import annotations

from neurondesk.core.figures.goodput import Goodput
from neurondesk.core.summary.types import Summary
from neurondesk.reports import fmt


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:,.1f} s"


def goodput_words(g: Goodput) -> str:
    """'5% (badput: startup 18.4 s, restart recovery 7.8 s, other 5.7 s); finished after 1 restart, 10 steps lost'."""
    top = sorted(((v, k) for k, v in g.badput.items() if v and v > 0), reverse=True)[:3]
    where = ", ".join(f"{k.replace('_', ' ')} {v:,.1f} s" for v, k in top)
    text = fmt.pct(g.fraction) + (f" (badput: {where})" if where else "")
    if g.restarts:
        lost = g.steps_lost
        text += f"; {g.ended}, {lost:,} step{'s' if lost != 1 else ''} lost, job step {g.max_step:,}"
    return text


def disruption_lines(g: Goodput) -> list[str]:
    """One line per disruption: which attempt, rank and step, its cause, what the restart cost."""
    out = []
    for d in g.disruptions:
        who = f"rank {d.rank}" if d.rank is not None else "the job"
        cause = d.cause or "no error said"
        line = f"attempt {d.attempt}: {who} failed at step {d.step or 0}: {cause[:160]}"
        if d.steps_lost is not None:
            line += f"; {d.steps_lost:,} steps run again ({_s(d.wasted_s)}), recovery {_s(d.recovery_s)}"
        if d.problem:
            line += f" ({d.problem})"
        out.append(line)
    if g.disruptions_total > len(g.disruptions):
        out.insert(0, f"{g.disruptions_total:,} disruptions, the last {len(g.disruptions)} listed")
    return out


def goodput_lines(s: Summary) -> list[str]:
    """What the final lines say of goodput: the figure, the disruptions, the restart's recompiles, problems."""
    g = s.goodput
    if g is None:
        return []
    out = [f"goodput {goodput_words(g)}", *disruption_lines(g)] if g.restarts else []
    out += [g.recompile] if g.recompile else []
    if g.restarts and not g.resume_known:
        out.append("a restart did not say where it resumed (no optimizer step count at its first step): "
                   "taken as a start over, every step before it lost")
    return out + list(g.problems)


def goodput_markdown(s: Summary) -> list[str]:
    """summary.md's goodput section: the figure, the badput by kind with its cost, the disruptions."""
    g = s.goodput
    if g is None:
        return []
    lines = ["", "## Goodput", "", f"**{fmt.pct(g.fraction)}** of {_s(g.wall_s)} moved the model "
             f"forward ({_s(g.productive_s)}, {fmt.usd(g.productive_usd)}); {g.ended}, "
             f"job step {g.max_step:,}, {g.restarts} restart(s), {g.steps_lost:,} "
             "steps lost.", "", "| badput | seconds | cost |", "|---|---:|---:|"]
    lines += [f"| {k.replace('_', ' ')} | {v:,.2f} | {fmt.usd(g.badput_usd.get(k))} |" for k, v in g.badput.items()]
    lines += [f"- {x}" for x in [*disruption_lines(g), *([g.recompile] if g.recompile else [])]]
    return lines
