"""Render a comparison (core/rules/compare.py) as Markdown, JSON or CSV. Nothing is computed here."""

from __future__ import annotations

import csv
import io
import json

from neurondesk.reports import fmt
from neurondesk.reports.summary_writer import jsonable


def cell_text(row: dict, i: int) -> str:
    """Run ``i``'s value in one compare row, the best in bold (Markdown; the HTML report too)."""
    if row["kind"] == "time_slice":  # seconds (share of the run, dollars)
        secs, share, usd = row["values"][i], row["shares"][i], row["usd"][i]
        if secs is None:
            return "—"
        extra = ", ".join(x for x in (fmt.value_text(share, "pct1") if share is not None else "",
                                      fmt.value_text(usd, "usd") if usd is not None else "") if x)
        return fmt.value_text(secs, "s") + (f" ({extra})" if extra else "")
    text = fmt.value_text(row["values"][i], row["kind"])
    return f"**{text}**" if row["best"] == i else text


def to_markdown(c: dict) -> str:
    runs = c["runs"]
    head = ["| |", *(f" {r['label']}: {r['run_id']} |" for r in runs)]
    lines = ["# neurondesk compare", ""]
    loud = [w for w in c["warnings"] if w["level"] == "loud"]
    lines += [f"> **WARNING: {w['message']}**" for w in loud]
    if loud:
        lines.append("")
    lines += ["".join(head), "|---" * (len(runs) + 1) + "|"]
    for row in c["rows"]:
        cells = [cell_text(row, i).replace("|", r"\|") for i in range(len(runs))]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    lines += ["", "**best** in bold where lower (or higher) is better.", ""]
    lines += [f"- {r['label']}: `{r['command']}`" for r in runs]
    notes = [f"- {r['label']} MFU: {r['mfu_note']}" for r in runs if r.get("mfu_note")]
    if notes:
        lines += ["", *notes]
    others = [w for w in c["warnings"] if w["level"] != "loud"]
    if others:
        lines += ["", "## Warnings", "", *(f"- {w['message']}" for w in others)]
    if c["payback_text"]:
        lines += ["", "## Compile payback", "", *(f"- {t}" for t in c["payback_text"])]
    if c.get("cache_text"):
        lines += ["", "## Compile cache", "", *(f"- {t}" for t in c["cache_text"])]
    lines += ["", f"**Verdict:** {c['verdict']}"]
    return "\n".join(lines) + "\n"


def to_json(c: dict) -> str:
    return json.dumps(jsonable(c), indent=2) + "\n"


def to_csv(c: dict) -> str:
    """One row per metric, one column per run, raw numbers; warnings and the verdict as rows too."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["metric", *(f"{r['label']}:{r['run_id']}" for r in c["runs"])])
    for row in c["rows"]:
        w.writerow([row["key"], *("" if v is None else v for v in row["values"])])
    for warning in c["warnings"]:
        w.writerow([f"warning:{warning['level']}", warning["message"]])
    for e in c.get("cache_saved") or []:
        w.writerow([f"cache_saved:{e['run']}-vs-{e['against']}", e["saved_s"], "" if e["saved_usd"] is None else e["saved_usd"]])
    w.writerow(["verdict", c["verdict"]])
    return buf.getvalue()


WRITERS = {"md": to_markdown, "json": to_json, "csv": to_csv}
