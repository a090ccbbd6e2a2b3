"""Plain tables for the cost board, the run history and the price list: text, md, json or csv.

``columns`` are (key, header, kind); rows are dicts of raw values. json and csv keep the raw
values; text and md format them (kinds as in fmt.value_text). Nothing computed here.
"""

from __future__ import annotations

import csv
import io
import json

from neurondesk.reports.fmt import value_text
from neurondesk.reports.safe_text import clean
from neurondesk.reports.summary_writer import jsonable

FORMATS = ("text", "md", "json", "csv")


def render(columns: list[tuple[str, str, str]], rows: list[dict], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(jsonable(rows), indent=2) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow([k for k, _, _ in columns])
        for r in rows:
            w.writerow(["" if r.get(k) is None else r.get(k) for k, _, _ in columns])
        return buf.getvalue()
    # made safe cell by cell (no colours: they would break the widths) before widths and cuts
    cells = [[clean(value_text(r.get(k), kind)) for k, _, kind in columns] for r in rows]
    heads = [h for _, h, _ in columns]
    if fmt == "md":
        lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(c.replace("|", r"\|") for c in row) + " |" for row in cells]
        return "\n".join(lines) + "\n"
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads)]
    numeric = [kind not in ("text",) for _, _, kind in columns]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()
    return "\n".join([line(heads), *(line(row) for row in cells)]) + "\n"
