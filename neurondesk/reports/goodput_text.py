"""Goodput in words, from a summary's ``goodput`` section (core/figures/goodput.py computes every number):
the summary's row, the disruptions' lines, summary.md's section. A summary written before goodput has none."""

from __future__ import annotations

from neurondesk.reports import fmt


def _s(x: float | None) -> str:
    return "—" if x is None else f"{x:,.1f} s"


def goodput_words(g: dict) -> str:
    """'5% (badput: startup 18.4 s, restart recovery 7.8 s, other 5.7 s); finished after 1 restart, 10 steps lost'."""
    top = sorted(((v, k) for k, v in (g.get("badput") or {}).items() if v and v > 0), reverse=True)[:3]
    where = ", ".join(f"{k.replace('_', ' ')} {v:,.1f} s" for v, k in top)
    text = fmt.pct(g.get("fraction")) + (f" (badput: {where})" if where else "")
    if g.get("restarts"):
        lost = g.get("steps_lost", 0)
        text += f"; {g['ended']}, {lost:,} step{'s' if lost != 1 else ''} lost, job step {g.get('max_step', 0):,}"
    return text


def disruption_lines(g: dict) -> list[str]:
    """One line per disruption: which attempt, rank and step, its cause, what the restart cost."""
    out = []
    for d in g.get("disruptions") or []:
        who = f"rank {d['rank']}" if d.get("rank") is not None else "the job"
        cause = d.get("cause") or "no error said"
        line = f"attempt {d['attempt']}: {who} failed at step {d.get('step') or 0}: {cause[:160]}"
        if d.get("steps_lost") is not None:
            line += f"; {d['steps_lost']:,} steps run again ({_s(d.get('wasted_s'))}), recovery {_s(d.get('recovery_s'))}"
        if d.get("problem"):
            line += f" ({d['problem']})"
        out.append(line)
    shown, total = len(g.get("disruptions") or []), g.get("disruptions_total", 0)
    if total > shown:
        out.insert(0, f"{total:,} disruptions, the last {shown} listed")
    return out


def goodput_lines(s: dict) -> list[str]:
    """What the final lines say of goodput: the figure, the disruptions, the restart's recompiles, problems."""
    g = s.get("goodput")
    if not g:
        return []
    out = [f"goodput {goodput_words(g)}"] if g.get("restarts") else []
    out += disruption_lines(g) if g.get("restarts") else []
    out += [g["recompile"]] if g.get("recompile") else []
    if g.get("restarts") and not g.get("resume_known", True):
        out.append("a restart did not say where it resumed (no optimizer step count at its first step): "
                   "taken as a start over, every step before it lost")
    return out + list(g.get("problems") or [])


def goodput_markdown(s: dict) -> list[str]:
    """summary.md's goodput section: the figure, the badput by kind with its cost, the disruptions."""
    g = s.get("goodput")
    if not g:
        return []
    usd = g.get("badput_usd") or {}
    lines = ["", "## Goodput", "", f"**{fmt.pct(g.get('fraction'))}** of {_s(g.get('wall_s'))} moved the model "
             f"forward ({_s(g.get('productive_s'))}, {fmt.usd(g.get('productive_usd'))}); {g.get('ended')}, "
             f"job step {g.get('max_step', 0):,}, {g.get('restarts', 0)} restart(s), {g.get('steps_lost', 0):,} "
             "steps lost.", "", "| badput | seconds | cost |", "|---|---:|---:|"]
    lines += [f"| {k.replace('_', ' ')} | {v:,.2f} | {fmt.usd(usd.get(k))} |" for k, v in (g.get("badput") or {}).items()]
    lines += [f"- {x}" for x in [*disruption_lines(g), *([g["recompile"]] if g.get("recompile") else [])]]
    return lines
