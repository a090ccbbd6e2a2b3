"""Advice as text: the words of `neurondesk advise` (the console's coloured forms are in
views/console/advice_panels.py).

Renders what core.advice and core.time_breakdown computed (as summary dicts); no figure is
made here.
"""

from __future__ import annotations

from neurondesk.reports import fmt

KIND_TITLE = {"shape-buckets": "shape buckets", "value-access": "value read inside the step",
              "graph-split": "step split into several graphs", "graph-grows": "graph grows every step"}


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
