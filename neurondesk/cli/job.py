"""`neurondesk job summary|report|export DIR...`: the run folders of a job's nodes merged into one job
summary (core/job/job_summary.py), its HTML report and its Perfetto trace (docs/fleet.md, "One summary of
the job"). DIR: a node's run folder, or a folder holding them (copied to one place, or on FSx)."""

from __future__ import annotations

import sys
from pathlib import Path

from neurondesk.cli.errors import die


def _gather(args, keep_states: bool = False):
    from neurondesk.sources.job_runs import JobRunsError, gather

    try:
        runs = gather(args.dirs, args.job, keep_states=keep_states)
    except JobRunsError as exc:
        die(str(exc))
    for note in runs.notes:
        sys.stderr.write(f"neurondesk: {note}\n")
    return runs


def _write(path: Path | None, text: str) -> None:
    if path is None or str(path) == "-":
        sys.stdout.write(text)
        return
    from neurondesk.store.summary_files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        die(f"cannot write {path}: {exc.strerror or exc}")


def cmd_job_summary(args) -> int:
    from neurondesk.core.job.job_summary import job_summary
    from neurondesk.reports.job_summary_text import WRITERS

    runs = _gather(args)
    _write(args.output, WRITERS[args.format](job_summary(runs.runs)))
    if args.output is not None and str(args.output) != "-":
        sys.stderr.write(f"neurondesk: job summary of {len(runs.runs)} node(s) written to {args.output}\n")
    return 0


def cmd_job_report(args) -> int:
    from neurondesk.core.job.job_summary import job_summary
    from neurondesk.core.view.read_views import step_chart
    from neurondesk.reports.html_report import ReportRun
    from neurondesk.reports.job_html import render_job

    runs = _gather(args, keep_states=True)
    job = job_summary(runs.runs)
    by_dir = {n.run_dir: (n, st) for n, st in zip(runs.runs, runs.states, strict=True)}
    reports = [ReportRun(by_dir[node.run_dir][0].summary, step_chart(by_dir[node.run_dir][1], points=600),
                         list(by_dir[node.run_dir][1].loss_history), node.run_dir) for node in job.nodes]
    _write(args.output, render_job(job, reports))
    sys.stderr.write(f"neurondesk: report of job {job.job_id or '(no job id)'} ({len(job.nodes)} node(s)) "
                     f"written to {args.output}\n")
    return 0


def cmd_job_export(args) -> int:
    from neurondesk.core.job.job_summary import job_summary
    from neurondesk.reports.job_trace import write_job_trace
    from neurondesk.reports.trace_parts import ExportRange
    from neurondesk.sources.rebuild import state_from_run_dir
    from neurondesk.store.journal import iter_journal
    from neurondesk.store.rundir import RunPaths

    runs = _gather(args)
    job = job_summary(runs.runs)

    def nodes():  # one node's state at a time: memory does not grow with the job
        for node in job.nodes:
            state, _ = state_from_run_dir(Path(node.run_dir))
            yield state, iter_journal(RunPaths(node.run_dir).events, [])

    try:
        if str(args.output) == "-":
            stats = write_job_trace(job, nodes(), sys.stdout)
        else:
            from neurondesk.store.summary_files import atomic_writer

            with atomic_writer(args.output) as f:  # the file appears whole, or not at all
                stats = write_job_trace(job, nodes(), f, ExportRange())
            stats.path = str(args.output)
    except (OSError, ValueError) as exc:
        die(str(exc))
    sys.stderr.write(f"neurondesk: job {job.job_id or '(no job id)'}, {len(job.nodes)} node(s): {stats.words()}\n")
    return 0


def add_parsers(sub) -> None:
    job = sub.add_parser("job", help="a job of many nodes from its nodes' run folders: summary, report, export")
    actions = job.add_subparsers(dest="job_cmd", required=True)
    for name, fn, helptext in (
            ("summary", cmd_job_summary, "one summary of the job (md, text, or json: docs/job-summary.schema.json)"),
            ("report", cmd_job_report, "one self-contained HTML report of the job and each node: -o job.html"),
            ("export", cmd_job_export, "the job as Trace Event JSON for ui.perfetto.dev: a track group per node")):
        p = actions.add_parser(name, help=helptext)
        p.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                       help="each node's run folder, or a folder holding them")
        p.add_argument("--job", metavar="ID", help="take this job's runs among the folders (others are left out)")
        if name == "summary":
            p.add_argument("--format", choices=("md", "text", "json"), default="md")
            p.add_argument("-o", "--output", type=Path, help="the file to write (default: stdout)")
        else:
            p.add_argument("-o", "--output", type=Path, required=True,
                           help="the file to write" + (" (- for stdout)" if name == "export" else ""))
        p.set_defaults(fn=fn)
