"""doctor's output: text for a person, JSON for a script, and the list of bundled tables."""

from __future__ import annotations

import json

from neurondesk.doctor.check import AREAS, Check, counts, exit_code
from neurondesk.doctor.tables import table_list

MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "--  "}


def as_text(checks: list[Check]) -> str:
    c = counts(checks)
    code = exit_code(checks)
    verdict = {0: "ready", 1: "ready, with warnings", 2: "not ready"}[code]
    if any(ch.found.startswith("No Neuron device") for ch in checks):
        verdict += ": no Neuron device on this machine"
    lines = [f"neurondesk doctor: {verdict} ({c['fail']} failed, {c['warn']} warnings, {c['ok']} ok, "
             f"{c['skip']} not checked)"]
    width = max((len(ch.name) for ch in checks), default=10)
    for area in AREAS:
        group = [ch for ch in checks if ch.area == area]
        if not group:
            continue
        lines.append(area)
        for ch in group:
            lines.append(f"  {MARK[ch.status]}  {ch.name:<{width}}  {ch.found}")
            if ch.todo and ch.status in ("warn", "fail"):
                lines.append(f"        {'':<{width}}  → {ch.todo}")
    return "\n".join(lines) + "\n"


def as_json(checks: list[Check]) -> str:
    return json.dumps({"exit": exit_code(checks), "counts": counts(checks),
                       "checks": [c.as_dict() for c in checks],
                       "tables": [{"table": t["table"], "checked": t["checked"]} for t in table_list()]},
                      indent=2) + "\n"


def tables_text() -> str:
    out = []
    for t in table_list():
        out.append(f"{t['table']}: {t['title']}\n  checked {t['checked']}\n  source: {t['source']}")
        if t["assumed"]:
            out.append(f"  assumed / not listed: {t['assumed']}")
    return "\n".join(out) + "\n"
