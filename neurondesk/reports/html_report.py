"""`neurondesk report RUN [RUN ...] -o report.html`: one self-contained HTML page (inline CSS, JS
and SVG, nothing fetched: a CI artifact or an e-mail attachment) of one run or several: the
summary, the advice, where the time and the money went, step-time and loss charts, the compile
table, the ranks, and for several runs the compare table with its warnings.

Every figure is the summary's (core/summary/build.py, read through its structs; the table rows are
summary.md's own, reports/summary_writer.report_rows) or the comparison's (core/rules/compare.py); the
charts draw core's step-time line (core/figures/series.py) and the loss the run printed. Every text from
the run (commands, locations, notices) is HTML-escaped.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from neurondesk.core.figures.series import StepTimeLine
from neurondesk.core.summary.types import Summary
from neurondesk.reports import fmt
from neurondesk.reports.compare_writer import cell_text
from neurondesk.reports.goodput_text import disruption_lines
from neurondesk.reports.html_svg import COLORS, Chart, Line, line_chart, stacked_bar
from neurondesk.reports.phases_text import phases_html
from neurondesk.reports.summary_writer import report_rows

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#111827;background:#f9fafb}
header{background:#111827;color:#f9fafb;padding:14px 24px}header h1{margin:0;font-size:20px}
main{max-width:1100px;margin:0 auto;padding:8px 24px 40px}section{background:#fff;border:1px solid #e5e7eb;
border-radius:8px;padding:12px 18px;margin:14px 0}h2{font-size:17px;margin:4px 0 10px}h3{font-size:15px;margin:12px 0 6px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #f3f4f6;
vertical-align:top}th{background:#f3f4f6;cursor:pointer;user-select:none}td.num{text-align:right;font-variant-numeric:tabular-nums}
.kpis{display:flex;flex-wrap:wrap;gap:10px}.kpi{border:1px solid #e5e7eb;border-radius:6px;padding:6px 12px;min-width:130px}
.kpi b{display:block;font-size:18px}.kpi span{color:#6b7280;font-size:12px}code{font-size:12px;word-break:break-all}
.warn{background:#fef3c7;border-left:4px solid #f59e0b;padding:6px 10px;margin:6px 0}.loud{background:#fee2e2;border-color:#dc2626}
svg.chart{width:100%;height:auto}svg.bar{width:100%;height:28px}.grid{stroke:#e5e7eb}.tick,.unit{font-size:11px;fill:#6b7280}
.mark{fill:#dc2626}.legend{font-size:12px;color:#374151}.legend span{margin-right:14px}.legend i{display:inline-block;
width:10px;height:10px;margin-right:4px;border-radius:2px}.legend i.dot{background:#dc2626;border-radius:50%}.empty{color:#6b7280}
"""

# Sorting by a click on a column head; sets data-ready once the page has run (the test reads it).
JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, i){th.addEventListener('click', function(){
 var body = th.closest('table').tBodies[0], rows = Array.from(body.rows), up = th.dataset.up !== '1';
 var key = function(r){var t = r.cells[i].dataset.v || r.cells[i].textContent, n = parseFloat(t.replace(/[^0-9.eE+-]/g, ''));
  return isNaN(n) ? t : n;};
 rows.sort(function(a, b){var x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * (up ? 1 : -1);});
 th.dataset.up = up ? '1' : '0'; rows.forEach(function(r){body.appendChild(r);});});});
document.body.dataset.ready = '1';
"""


@dataclass(frozen=True)
class ReportRun:
    summary: Summary
    line: StepTimeLine  # core/series.chart_line of the run
    loss: list[tuple[int, float]]  # (step, loss) as the run printed them (the latest ones kept)
    folder: str


def e(x) -> str:
    return html.escape("" if x is None else str(x))


def render(runs: list[ReportRun], comparison: dict | None = None, title: str | None = None, lead: str = "") -> str:
    """``title`` and ``lead`` (HTML, before the runs): a job's report (reports/job_html.py)."""
    title = title or "neurondesk report: " + ", ".join(r.summary.run_id or "?" for r in runs)
    body = [f"<header><h1>{e(title)}</h1></header><main>", lead]
    if comparison is not None:
        body.append(_compare(comparison))
    for i, run in enumerate(runs):
        body.append(_run(i, run))
    body.append("</main>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<style>{CSS}</style></head><body>{''.join(body)}<script>{JS}</script></body></html>\n")


def _kpis(i: int, s: Summary) -> str:
    f = s.figures
    items = [("steps", f"{s.steps:,}" + (f" / {s.steps_requested:,}" if s.steps_requested else ""), "steps"),
             ("samples", fmt.rate(s.steady.samples_per_s), "steady samples/s"),
             ("step-time", fmt.ms(s.steady.step_time_s), "steady step time"),
             ("compiles", f"{s.compile_count:,} ({fmt.secs(s.compile_total_s)})", "compiles"),
             ("cost", fmt.usd(s.cost.total_usd), "cost"),
             ("per-1k", fmt.usd(s.cost.per_1k_steps_steady_usd), "$ / 1k steps steady"),
             ("exit", e(s.exit_code), "exit code")]
    if f is not None and f.mfu is not None:
        items.append(("mfu", fmt.pct(f.mfu), "MFU"))
    return '<div class="kpis">' + "".join(f'<div class="kpi"><b id="r{i}-{k}">{e(v)}</b><span>{e(label)}</span></div>'
                                          for k, v, label in items) + "</div>"


def _crash(i: int, s: Summary) -> str:
    """How the run died (core/findings/crash.py): the finding, what to try, the memory at the end, the line that told."""
    c = s.crash
    if c is None:
        return ""
    memory = "".join(f"<br>{e(m.words)}" for m in (c.host_memory, c.device_memory) if m is not None and m.words)
    told = f"<br>told by: <code>{e(c.evidence)}</code>" if c.evidence else ""
    return (f'<div class="warn loud" id="r{i}-crash" data-kind="{e(c.kind)}"><b>died ({e(c.kind)})</b>: '
            f"{e(c.finding)}<br>try: {e(c.try_next)}{memory}{told}</div>")


def _goodput(i: int, s: Summary) -> str:
    """Goodput (core/figures/goodput.py): the productive share and the badput by kind as one bar, the disruptions."""
    g = s.goodput
    if g is None:
        return ""
    wall = g.wall_s or 1.0
    parts = [("productive", g.productive_s / wall, f"{fmt.secs(g.productive_s)} · {fmt.usd(g.productive_usd)}")]
    parts += [(k.replace("_", " "), v / wall, f"{fmt.secs(v)} · {fmt.usd(g.badput_usd.get(k))}")
              for k, v in g.badput.items() if v > 0]
    lost = "".join(f"<li>{e(line)}</li>" for line in disruption_lines(g))
    return (f'<h3 id="r{i}-goodput">Goodput {e(fmt.pct(g.fraction))}: {e(g.ended)}</h3>' + stacked_bar(parts)
            + (f"<ul>{lost}</ul>" if lost else "") + (f'<div class="warn">{e(g.recompile)}</div>' if g.recompile else ""))


def _creep(i: int, s: Summary) -> str:
    """Memory that creeps (core/findings/memory_creep.py): each leak in words, with the line lint found."""
    c = s.memory_creep
    if c is None:
        return ""
    leaks = "".join(f"<br>{e(x.words)}" for x in c.leaks)  # with the line lint found, where the CLI asked it
    return f'<div class="warn" id="r{i}-memory-creep"><b>memory creeps</b>{leaks}</div>'


def _run(i: int, run: ReportRun) -> str:
    s = run.summary
    out = [f'<section id="run-{i}"><h2>Run {e(s.run_id)}</h2>',
           f'<p><code>{e(" ".join(s.command))}</code><br>{e(s.started_at)} · {e(run.folder)}</p>', _kpis(i, s),
           _crash(i, s), _creep(i, s)]
    out += [f'<div class="warn">{e(d.message)}</div>' for d in s.diagnostics]
    if s.advice:
        out.append("<h3>What to do</h3><ul>" + "".join(f"<li>{e(a.get('message'))}</li>" for a in s.advice) + "</ul>")
    if s.time_breakdown:
        out.append("<h3>Where the time and the money went</h3>")
        out.append(stacked_bar([(x.name, x.share or 0.0, f"{fmt.secs(x.seconds)} · {fmt.pct(x.share)} · {fmt.usd(x.usd)}")
                                for x in s.time_breakdown]))
    out.append(_goodput(i, s))
    out.append(phases_html(s))  # the steady step by phase and its verdict (reports/phases_text.py)
    out.append(_charts(run))
    out.append("<h3>Summary</h3>" + _table(["", ""], [[k, v] for k, v in report_rows(s)], sortable=False))
    out.append(_compiles(s))
    out.append(_ranks(s))
    if s.notices:
        out.append("<h3>Notices</h3><ul>" + "".join(f"<li>{e(n)}</li>" for n in s.notices) + "</ul>")
    return "".join(out) + "</section>"


def _charts(run: ReportRun) -> str:
    ln = run.line
    step = Chart("step time (ms)", "ms", [
        Line(f"median (rolling {ln.window})", ln.steps, [x * 1e3 for x in ln.median_s], COLORS[0]),
        Line("p90" if len(ln.p90_s) == len(ln.steps) else "max", ln.steps, [x * 1e3 for x in ln.p90_s], COLORS[1], True)],
        marks=list(zip(ln.compile_steps, [x * 1e3 for x in ln.compile_s], strict=False)),
        mark_label="step that compiled (at the top: above the scale)", clip_marks=True)
    loss = Chart("loss", "loss", [Line("loss", [float(a) for a, _ in run.loss], [b for _, b in run.loss], COLORS[3])])
    return "<h3>Step time</h3>" + line_chart(step) + "<h3>Loss</h3>" + line_chart(loss)


def _table(head: list[str], rows: list[list[str]], sortable: bool = True, num: tuple[int, ...] = ()) -> str:
    cls = ' class="sortable"' if sortable else ""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f'<td{" class=num" if j in num else ""}>{e(c)}</td>' for j, c in enumerate(r)) + "</tr>"
                  for r in rows)
    return f"<table{cls}><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def _compiles(s: Summary) -> str:
    if not s.compiles:
        return "<h3>Compiles</h3><p class=\"empty\">none seen</p>"
    rows = [[str(i), fmt.value_text(c.step, "int"), c.cause or "—", c.location or c.name or "—",
             fmt.value_text(c.duration_s, "s") + ("" if c.counted else " (not in the total)"),
             c.cache or "—", c.status or "—", c.graph_hash or "—"] for i, c in enumerate(s.compiles, 1)]
    return (f'<h3>Compiles ({s.compile_count:,}, {fmt.secs(s.compile_total_s)})</h3>'
            + _table(["#", "step", "cause", "location", "duration", "cache", "status", "graph"], rows, num=(0, 1, 4)))


def _ranks(s: Summary) -> str:
    out = []
    if s.world_size > 1 and s.ranks:
        rows = [[str(r.rank), f"{r.steps:,}", fmt.ms(r.step_time_s), fmt.ms(r.presync_s), fmt.rate(r.samples_per_s)]
                for r in s.ranks]
        out.append(f"<h3>Ranks ({s.world_size})</h3>" + _table(["rank", "steps", "step time", "before sync", "samples/s"],
                                                              rows, num=(0, 1, 2, 3, 4)))
    out += [f'<div class="warn">straggler: {e(x.words)}</div>' for x in s.stragglers]
    if s.failed_rank is not None:
        f = s.failed_rank
        who = f"rank {f.rank}" if f.rank is not None else f"pid {f.pid}"
        out.append(f'<div class="warn loud">{e(who)} failed first: {e(f.error)}</div>')
    return "".join(out)


def _compare(c: dict) -> str:
    runs = c["runs"]
    out = ['<section id="compare"><h2>Compare</h2>']
    out += [f'<div class="warn{" loud" if w["level"] == "loud" else ""}">{e(w["message"])}</div>' for w in c["warnings"]]
    head = ["", *(f"{r['label']}: {r['run_id']}" for r in runs)]
    rows = [[row["label"], *(cell_text(row, i).replace("**", "") for i in range(len(runs)))] for row in c["rows"]]
    out.append(_table(head, rows, sortable=False))
    out += [f"<p>{e(t)}</p>" for t in (c.get("payback_text") or []) + (c.get("cache_text") or [])]
    out.append(f'<p><b>Verdict:</b> <span id="verdict">{e(c["verdict"])}</span></p></section>')
    return "".join(out)
