"""`neurondesk job report DIR... -o job.html`: the run report (reports/html_report.py) of a job of many
nodes: first the job (its figures, its findings, a row per node and per rank), then each node's run as
the run report draws it. Every figure is the job summary's (core/job/job_summary.py) or the node's."""

from __future__ import annotations

from neurondesk.core.job.job_summary import JobSummary
from neurondesk.reports import fmt
from neurondesk.reports.html_report import ReportRun, _table, e, render
from neurondesk.reports.job_summary_text import NODE_HEAD, findings, node_rows


def _kpis(j: JobSummary) -> str:
    f = j.figures
    items = [("nodes", f"{f.nodes}" + (f" / {j.nodes_expected}" if j.nodes_expected else ""), "nodes"),
             ("ranks", str(len(j.ranks)), "ranks"), ("steps", f"{f.steps:,}", "steps (every node)"),
             ("samples", fmt.rate(f.samples_per_s), "steady samples/s (job)"),
             ("step-time", fmt.ms(f.step_time_s), "steady step (slowest node)"),
             ("price", fmt.usd(f.price_per_hour), "$ / hour (every node)"), ("cost", fmt.usd(f.total_usd), "cost"),
             ("per-1k", fmt.usd(f.per_1k_steps_steady_usd), "$ / 1k steps steady"),
             ("compile", f"{fmt.secs(f.compile_wall_s)} (+{fmt.secs(f.compile_wait_s)} waited)", "compile wall"),
             ("mfu", fmt.pct(f.mfu), "MFU (every device)")]
    return '<div class="kpis">' + "".join(f'<div class="kpi"><b id="job-{k}">{e(v)}</b><span>{e(label)}</span></div>'
                                          for k, v, label in items) + "</div>"


def job_section(j: JobSummary) -> str:
    lines = findings(j)
    out = [f'<section id="job"><h2>Job {e(j.job_id or "(no job id)")}</h2>', _kpis(j)]
    out += [f'<div class="warn{" loud" if line.startswith(("failed", "problem")) else ""}">{e(line)}</div>'
            for line in lines[1:]]
    out.append(f"<h3>Nodes ({len(j.nodes)})</h3>" + _table(list(NODE_HEAD), node_rows(j), num=(1, 4, 5, 6, 7, 8)))
    if j.ranks:
        slow = (j.slowest.node, j.slowest.rank) if j.slowest else None
        rows = [[str(r.rank), r.node, f"{r.steps:,}", fmt.ms(r.step_time_s), fmt.ms(r.presync_s), fmt.ms(r.wait_s),
                 "culprit" if (r.node, r.rank) == slow else ""] for r in j.ranks]
        out.append(f"<h3>Ranks ({len(j.ranks)})</h3>" + _table(
            ["rank", "node", "steps", "step time", "before sync", "in the collective", ""], rows, num=(0, 2, 3, 4, 5)))
    return "".join(out) + "</section>"


def render_job(j: JobSummary, runs: list[ReportRun]) -> str:
    return render(runs, title=f"neurondesk job report: {j.job_id or '(no job id)'} ({len(j.nodes)} nodes)",
                  lead=job_section(j))
