"""Compare runs side by side, the way the tutorial's table must be read. Pure.

``compare(summaries, target_loss)`` takes run summaries (core/summary/types.py's Summary; rebuilt with the
same target loss) and returns a dict: ``runs``, ``rows`` (one metric per row, one raw value per run,
the best run's index), ``warnings``, ``ranking``, ``payback`` and a one-line ``verdict``.

The three rules:
1. precision differs → a loud warning (level "loud"), and the verdict says the comparison is not
   like for like;
2. batch size, sequence length, learning rate, seed or data order differ (or the model) → a
   warning each; a run that declared no configuration cannot be checked, which is a warning too;
3. runs that did not reach the target loss are not ranked on cost-to-target.

Payback: when run i compiles longer than run j but its steady steps are faster, its extra compile
time is paid back after ceil(extra compile s / saved s per step) steps; divided by the run's own
length, that is the number of repeated runs it takes when the later runs hit a warm compile cache
(and so compile nothing). The same in dollars when both runs have a price.

Cache: a run whose first step a warm compile cache served (the ``ttfi_cache`` figure) against a cold
one: the seconds to the first step it saved (``ttfi_s``) and what they cost (``cache_saved``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from neurondesk.core.figures.cost import cost_so_far
from neurondesk.core.figures.run_figures import FIGURES, rate_text
from neurondesk.core.figures.time_breakdown import SLICES
from neurondesk.core.summary.types import Summary

CONFIG_RULES = (("batch_size", "batch size"), ("seq_len", "sequence length"), ("lr", "learning rate"),
                ("seed", "seed"), ("data_order", "data order"))

# key, label, kind (how views format it), better ("lower" | "higher" | None)
ROWS = (
    ("device", "device", "text", None),
    ("precision", "precision", "text", None),
    ("steps", "steps run", "int", None),
    ("step_time_s", "steady step time (median)", "ms", "lower"),
    ("samples_per_s", "samples/s (steady)", "rate", "higher"),
    ("tokens_per_s", "tokens/s (steady)", "rate", "higher"),
    ("first_compile_s", "first compile", "s", "lower"),
    ("compile_total_s", "total compile", "s", "lower"),
    ("compile_count", "compiles", "int", None),
    ("steps_to_target", "steps to loss {t}", "int", "lower"),
    ("time_to_target_s", "time to loss {t} (from start)", "s", "lower"),
    ("cost_to_target_usd", "cost to loss {t}", "usd", "lower"),
    ("price_per_hour", "price per hour", "usd_h", None),
    ("price_source", "price source", "text", None),
    ("per_1k_steps_steady_usd", "$ / 1k steps steady", "usd", "lower"),
    ("per_1k_steps_all_in_usd", "$ / 1k steps all-in", "usd", "lower"),
    ("per_million_tokens_usd", "$ / 1M tokens", "usd", "lower"),
    ("mfu", "MFU", "pct", "higher"),
    ("hfu", "HFU (neuron-monitor)", "pct", "higher"),
    ("loss_last", "last loss", "loss", None),
    ("goodput", "goodput", "pct", "higher"),  # productive training time / wall time (core/figures/goodput.py)
    ("restarts", "restarts", "int", "lower"),
    ("goodput_steps_lost", "steps lost to restarts", "int", "lower"),
    *((f.name, f.label, f.kind, f.better) for f in FIGURES if f.report),  # read from "figures"
)


def _device(s: Summary) -> str:
    kind, name, inst = s.device.kind, s.device.name, s.cost.instance_type
    return f"{kind or '?'}" + (f" ({name})" if name and name != kind else "") + (f" @ {inst}" if inst else "")


def run_values(s: Summary) -> dict[str, Any]:
    """The metrics of one summary, by row key."""
    price, ttt = s.cost.price_per_hour, s.loss.time_to_target_s
    reached = s.loss.steps_to_target is not None
    return {
        "device": _device(s),
        "precision": s.precision,
        "steps": s.steps,
        "step_time_s": s.steady.step_time_s,
        "samples_per_s": s.steady.samples_per_s,
        "tokens_per_s": s.steady.tokens_per_s,
        "first_compile_s": s.first_compile_s,
        "compile_total_s": s.compile_total_s,
        "compile_count": s.compile_count,
        "steps_to_target": s.loss.steps_to_target,
        "time_to_target_s": ttt if reached else None,
        "cost_to_target_usd": cost_so_far(price, ttt) if reached else None,
        "price_per_hour": price,
        "price_source": s.cost.price_source,
        "per_1k_steps_steady_usd": s.cost.per_1k_steps_steady_usd,
        "per_1k_steps_all_in_usd": s.cost.per_1k_steps_all_in_usd,
        "per_million_tokens_usd": s.cost.per_million_tokens_usd,
        "mfu": s.mfu,
        "hfu": s.hfu,
        "loss_last": s.loss.last,
        "goodput": s.goodput.fraction if s.goodput else None,
        "restarts": s.goodput.restarts if s.goodput else None,
        "goodput_steps_lost": s.goodput.steps_lost if s.goodput else None,
        **{f.name: getattr(s.figures, f.name) if s.figures is not None else None for f in FIGURES if f.report},
    }


def choose_target(summaries: Sequence[Summary], requested: float | None) -> tuple[float | None, list[str]]:
    """The target loss to compare at: the one asked for, else the one every run recorded."""
    if requested is not None:
        return requested, []
    targets = {s.loss.target for s in summaries}
    if len(targets) == 1:
        return targets.pop(), []
    shown = ", ".join(sorted("none" if t is None else f"{t:g}" for t in targets))
    return None, [f"the runs recorded different target losses ({shown}): pass --target-loss to compare "
                  "steps, time and cost to the same loss"]


def _norm(v: Any) -> Any:
    return round(v, 12) if isinstance(v, float) else v


def config_warnings(labels: list[str], summaries: Sequence[Summary]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    precisions = [s.precision for s in summaries]
    if len({str(p) for p in precisions}) > 1:
        shown = ", ".join(f"{lab} {p or 'unknown'}" for lab, p in zip(labels, precisions, strict=True))
        out.append({"level": "loud", "message": f"PRECISION DIFFERS ({shown}): speed, cost and convergence "
                                                "are not comparable; rerun with the same --precision"})
    configs = [s.config or {} for s in summaries]
    for lab, c in zip(labels, configs, strict=True):
        if not c:
            out.append({"level": "warn", "message": f"{lab} declared no configuration (no neurondesk-config line): "
                                                    "batch size, sequence length, lr, seed and data order "
                                                    "cannot be checked"})
    known = [(lab, c) for lab, c in zip(labels, configs, strict=True) if c]
    for key, words in (*CONFIG_RULES, ("model", "model"), ("param_count", "parameter count")):
        values = [(lab, c.get(key)) for lab, c in known]
        if len({repr(_norm(v)) for _, v in values}) > 1:
            shown = "; ".join(f"{lab} {v if v is not None else 'not declared'}" for lab, v in values)
            out.append({"level": "warn", "message": f"{words} differs: {shown}"})
    return out


def payback(labels: list[str], vals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, a in enumerate(vals):
        for j, b in enumerate(vals):
            ca, cb = a["compile_total_s"] or 0.0, b["compile_total_s"] or 0.0
            sa, sb = a["step_time_s"], b["step_time_s"]
            if i == j or ca <= cb or sa is None or sb is None:
                continue
            extra, saved = ca - cb, sb - sa
            e: dict[str, Any] = {"run": labels[i], "against": labels[j], "extra_compile_s": extra,
                                 "saved_per_step_s": saved, "steps": None, "run_steps": a["steps"], "runs": None,
                                 "steps_in_usd": None}
            if saved > 0:
                e["steps"] = math.ceil(extra / saved)
                if a["steps"]:
                    e["runs"] = math.ceil(e["steps"] / a["steps"])
            pa, pb = a["price_per_hour"], b["price_per_hour"]
            if pa is not None and pb is not None and pa != pb:
                extra_usd, saved_usd = (pa * ca - pb * cb) / 3600, (pb * sb - pa * sa) / 3600
                e["steps_in_usd"] = 0 if extra_usd <= 0 else (math.ceil(extra_usd / saved_usd) if saved_usd > 0 else None)
            out.append(e)
    return out


def payback_text(e: dict[str, Any]) -> str:
    head = f"{e['run']}'s extra {e['extra_compile_s']:.1f} s of compile (against {e['against']})"
    if e["steps"] is None:
        text = f"{head} is never paid back: its steady steps are not faster ({-e['saved_per_step_s'] * 1000:.1f} ms slower)"
    else:
        text = f"{head} is paid back after {e['steps']:,} steps ({e['saved_per_step_s'] * 1000:.1f} ms saved per step)"
        if e["runs"] is not None and e["run_steps"]:
            text += ("" if e["runs"] <= 1 else
                     f", i.e. {e['runs']:,} runs of {e['run_steps']:,} steps when later runs hit a warm compile cache")
    if e["steps_in_usd"] is not None:
        text += f"; in dollars after {e['steps_in_usd']:,} steps"
    return text


def cache_savings(labels: list[str], vals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a warm compile (NEFF) cache saved: each run whose first step was served by the persistent
    cache (figure ``ttfi_cache`` "warm") against each run that compiled before its first step
    ("cold"). ``saved_s``: the time to first step it saved (figure ``ttfi_s``, cold minus warm);
    ``compile_saved_s``: the compile seconds of the whole run it did not spend; ``saved_usd``:
    ``saved_s`` at the warm run's price (the cold run's when the warm one has none)."""
    out = []
    for w, warm in enumerate(vals):
        for c, cold in enumerate(vals):
            if warm.get("ttfi_cache") != "warm" or cold.get("ttfi_cache") != "cold":
                continue
            if warm.get("ttfi_s") is None or cold.get("ttfi_s") is None:
                continue
            saved = cold["ttfi_s"] - warm["ttfi_s"]
            price = warm["price_per_hour"] if warm["price_per_hour"] is not None else cold["price_per_hour"]
            out.append({"run": labels[w], "against": labels[c], "saved_s": saved,
                        "compile_saved_s": _compile_saved(cold, warm),
                        "saved_usd": cost_so_far(price, saved) if saved >= 0 else None, "price_per_hour": price})
    return out


def _compile_saved(cold: dict[str, Any], warm: dict[str, Any]) -> float | None:
    """The cold run's compile seconds less the warm one's; None when the cold run's are unknown (its
    NEFF compiles counted from TorchNeuron's log, which gives no times)."""
    if cold["compile_total_s"] is None:
        return None
    return cold["compile_total_s"] - (warm["compile_total_s"] or 0.0)


def cache_text(e: dict[str, Any]) -> str:
    if e["saved_s"] < 0:
        return (f"{e['run']}'s warm compile cache did not shorten its time to first step against {e['against']}'s "
                f"cold one ({-e['saved_s']:.1f} s slower): something else than compiling held it back")
    usd = "" if e["saved_usd"] is None else f", ${e['saved_usd']:,.4f} at ${e['price_per_hour']:,.2f}/hour"
    return (f"{e['run']}'s warm compile cache saved {e['saved_s']:.1f} s to the first step against {e['against']}'s "
            f"cold start{usd}; " + ("compile seconds of the whole run unknown (no source timed them)"
                                    if e["compile_saved_s"] is None else
                                    f"{e['compile_saved_s']:.1f} s of compile in the whole run"))


def _ranking(labels: list[str], vals: list[dict[str, Any]], target: float | None) -> dict[str, Any]:
    reached = [v["steps_to_target"] is not None for v in vals]
    if target is not None and any(reached):
        key = "cost_to_target_usd" if all(v["price_per_hour"] is not None for v, r in zip(vals, reached, strict=True) if r) \
            else "time_to_target_s"
    else:
        key = "per_1k_steps_steady_usd" if any(v["per_1k_steps_steady_usd"] is not None for v in vals) else "samples_per_s"
    better = next(r[3] for r in ROWS if r[0] == key)
    ranked, unranked = [], []
    for i, v in enumerate(vals):
        if key in ("cost_to_target_usd", "time_to_target_s") and not reached[i]:
            last = v["loss_last"]
            unranked.append({"run": labels[i], "why": f"did not reach loss {target:g}"
                             + (f" (last {last:.4g})" if isinstance(last, int | float) else "")})
        elif v[key] is None:
            unranked.append({"run": labels[i], "why": f"no {dict((r[0], r[1]) for r in ROWS)[key]}".format(t=target)})
        else:
            ranked.append(i)
    ranked.sort(key=lambda i: vals[i][key] if better == "lower" else -vals[i][key])
    return {"basis": key, "better": better, "order": [labels[i] for i in ranked], "unranked": unranked,
            "_idx": ranked}


def _fmt_basis(key: str, x: float) -> str:
    if key.endswith("_usd"):
        return f"${x:,.4f}" if abs(x) < 1 else f"${x:,.2f}"
    return f"{x:,.1f} s" if key.endswith("_s") and not key.endswith("per_s") else rate_text(x)


def _verdict(labels, vals, ranking, target, loud, pay) -> str:
    key, idx = ranking["basis"], ranking["_idx"]
    what = {r[0]: r[1] for r in ROWS}[key].format(t="(target)" if target is None else f"{target:g}")
    if len(idx) >= 2 and vals[idx[0]][key] == vals[idx[1]][key]:
        text = f"{labels[idx[0]]} and {labels[idx[1]]} tie on {what} ({_fmt_basis(key, vals[idx[0]][key])})"
    elif len(idx) >= 2:
        a, b = vals[idx[0]][key], vals[idx[1]][key]
        ratio = (b / a if ranking["better"] == "lower" else a / b) if a and b else None
        text = (f"{labels[idx[0]]} ranks first on {what}: {_fmt_basis(key, a)} against {_fmt_basis(key, b)} "
                f"for {labels[idx[1]]}" + (f" ({ratio:.2f}×)" if ratio else ""))
    elif len(idx) == 1:
        text = f"{labels[idx[0]]} is the only run ranked on {what} ({_fmt_basis(key, vals[idx[0]][key])})"
    else:
        text = f"no run can be ranked on {what}"
    if target is not None and key not in ("cost_to_target_usd", "time_to_target_s"):
        text = f"no run reached loss {target:g}; " + text
    if ranking["unranked"]:
        text += "; not ranked: " + ", ".join(f"{u['run']} ({u['why']})" for u in ranking["unranked"])
    best = labels[idx[0]] if idx else None
    for e in pay:
        if best in (e["run"], e["against"]):
            text += "; " + payback_text(e)
            if e["run"] == best and e["steps"] is None:  # it ranks first with slower steps: say why
                text += _first_yet_slower(key, vals[idx[0]], vals[labels.index(e["against"])])
            break
    return ("NOT LIKE FOR LIKE (precision differs): " if loud else "") + text


def _first_yet_slower(key: str, first: dict[str, Any], other: dict[str, Any]) -> str:
    """Why the first-ranked run ranks first although its steady steps are slower than ``other``'s:
    every steady rate is a step's amount over the same median step (core/reduce/steps.py), so on a
    rate it does more a step; on dollars its price is lower."""
    if key in ("samples_per_s", "tokens_per_s"):
        unit = key.removesuffix("_per_s")
        a, b = (v[key] * v["step_time_s"] if v[key] and v["step_time_s"] else None for v in (first, other))
        if a is not None and b is not None:
            return f", yet it ranks first: it does more {unit} a step ({a:,.4g} against {b:,.4g})"
    sa, sb = first["steps_to_target"], other["steps_to_target"]
    if key in ("time_to_target_s", "cost_to_target_usd") and sa is not None and sb is not None and sa < sb:
        return f", yet it ranks first: it reaches the loss in fewer steps ({sa:,} against {sb:,})"
    pa, pb = first["price_per_hour"], other["price_per_hour"]
    if key.endswith("_usd") and pa is not None and pb is not None and pa < pb:
        return f", yet it ranks first: its price is lower (${pa:,.2f}/h against ${pb:,.2f}/h)"
    return ", yet it ranks first on this basis"


def breakdown_rows(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """Where the time went, side by side: one row per slice of summary.json's time_breakdown
    (seconds as the row's values; each run's share of its wall time and dollars beside them).
    No best: more training time in a longer run is not worse. None for a summary without it."""
    per_run = [{x.name: x for x in s.time_breakdown} for s in summaries]
    names = [n for n in SLICES if any(n in r for r in per_run)]
    names += sorted({n for r in per_run for n in r} - set(names))

    def column(n: str, field: str) -> list[Any]:
        return [getattr(r[n], field) if n in r else None for r in per_run]
    return [{"key": f"time:{n}", "label": f"time: {n}", "kind": "time_slice", "better": None,
             "values": column(n, "seconds"), "shares": column(n, "share"), "usd": column(n, "usd"), "best": None}
            for n in names]


def compare(summaries: Sequence[Summary], target_loss: float | None = None,
            labels: list[str] | None = None) -> dict[str, Any]:
    if len(summaries) < 2:
        raise ValueError("compare needs at least two runs")
    labels = labels or [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(len(summaries))]
    vals = [run_values(s) for s in summaries]
    target, target_warnings = choose_target(summaries, target_loss)
    if target is None:  # figures against each run's own target would not be comparable
        for v in vals:
            v.update(steps_to_target=None, time_to_target_s=None, cost_to_target_usd=None)
    warnings = config_warnings(labels, summaries) + [{"level": "warn", "message": m} for m in target_warnings]
    rows = []
    for key, label, kind, better in ROWS:
        values = [v[key] for v in vals]
        nums = [(x, i) for i, x in enumerate(values) if isinstance(x, int | float)]
        best = None
        if better and len(nums) >= 2:
            top = (min if better == "lower" else max)(x for x, _ in nums)
            winners = [i for x, i in nums if x == top]
            best = winners[0] if len(winners) == 1 else None  # a tie has no best
        rows.append({"key": key, "label": label.format(t="(target)" if target is None else f"{target:g}"),
                     "kind": kind, "better": better, "values": values, "best": best})
    rows += breakdown_rows(summaries)
    ranking = _ranking(labels, vals, target)
    pay = payback(labels, vals)
    cache = cache_savings(labels, vals)
    loud = any(w["level"] == "loud" for w in warnings)
    verdict = _verdict(labels, vals, ranking, target, loud, pay)
    ranking.pop("_idx")
    runs = [{"label": lab, "run_id": s.run_id, "command": " ".join(map(str, s.command)), "mfu_note": s.mfu_note}
            for lab, s in zip(labels, summaries, strict=True)]
    return {"runs": runs, "target_loss": target, "rows": rows, "warnings": warnings, "ranking": ranking,
            "payback": pay, "payback_text": [payback_text(e) for e in pay],
            "cache_saved": cache, "cache_text": [cache_text(e) for e in cache], "verdict": verdict}
