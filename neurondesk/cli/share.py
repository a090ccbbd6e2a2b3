"""The command line of "look, share and be told": the run's alert and budget options, and the
commands that hand a run to other tools (``export`` to Perfetto / Chrome tracing, ``report`` to one
HTML file, ``stacks`` of a live run's ranks)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neurondesk.cli.args import MAX_PRICE_PER_HOUR, MAX_SECONDS, MAX_STEPS, number, whole
from neurondesk.cli.errors import die
from neurondesk.cli.history import resolve_run
from neurondesk.cli.sinks import SINK_FORMATS, cmd_export_sink


def add_alert_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("alerts and budget (docs/export-report-alerts.md)")
    g.add_argument("--notify", action="store_true",
                   help="ring the terminal (bell, OSC 777 / OSC 9 desktop notification) on each alert")
    g.add_argument("--notify-url-file", metavar="PATH", type=Path,
                   help="POST each alert as JSON (with a Slack-compatible 'text') to the URL in this file (one "
                        "line; a file of yours with mode 0600, never a link); the environment variable "
                        "NEURONDESK_NOTIFY_URL works too. The URL is never written to any log or passed to the "
                        "workload")
    g.add_argument("--notify-url", metavar="URL",
                   help="the same with the URL on the command line, where every user of the machine reads it "
                        "(ps) for the whole run: use --notify-url-file or NEURONDESK_NOTIFY_URL instead")
    g.add_argument("--notify-compile-s", type=number(0, MAX_SECONDS), default=60.0, metavar="S",
                   help="alert when a compile longer than S seconds ends (default 60)")
    g.add_argument("--budget-usd", type=number(0.01, MAX_PRICE_PER_HOUR * 366 * 24), metavar="X",
                   help="warn at 80%% of X dollars, alert at 100%%")
    g.add_argument("--budget-stop", action="store_true",
                   help="with --budget-usd: at 100%% stop the workload (SIGINT, then SIGTERM, as the console's s)")
    g.add_argument("--hang-after", type=number(1, MAX_SECONDS), metavar="S", dest="hang_after_s",
                   help="a run with no progress for S seconds (no step, no evaluation batch, no progress "
                        "line it prints) while nothing compiles is hung "
                        "(default: max(10 x the steady median step, 5 min))")


def notify_url(args, env=None) -> str | None:
    """The webhook URL: from --notify-url-file, else NEURONDESK_NOTIFY_URL, else --notify-url (said
    once on stderr: a command line is everyone's to read). A refused file or a bad URL ends here."""
    import os

    from neurondesk.recorder.notify_webhook import check_url
    from neurondesk.store.secret_inputs import NOTIFY_URL_ENV, SecretRefused, read_secret_file

    env = os.environ if env is None else env
    given, path = getattr(args, "notify_url", None), getattr(args, "notify_url_file", None)
    if given and path is not None:
        die("give the webhook URL one way: --notify-url-file PATH (or NEURONDESK_NOTIFY_URL), not with --notify-url too")
    if path is not None:
        try:
            url, what = read_secret_file(path), f"--notify-url-file {path}"
        except SecretRefused as exc:
            die(str(exc))
    elif given:
        url, what = given, "--notify-url"
        sys.stderr.write("neurondesk: warning: --notify-url puts the webhook URL (and the token in it) on the command "
                         "line, where every user of this machine reads it (ps, /proc/PID/cmdline) for the whole run; "
                         "put it in a file only you can read (chmod 600) and give --notify-url-file PATH, or set "
                         f"{NOTIFY_URL_ENV}\n")
    else:
        url, what = env.get(NOTIFY_URL_ENV, "").strip(), NOTIFY_URL_ENV
    if not url:
        return None
    why = check_url(url, what)
    if why:
        die(why)
    return url


def alert_options(args) -> dict:
    """RunOptions fields from the alert options (a bad URL or --budget-stop alone ends here)."""
    url = notify_url(args)
    if getattr(args, "budget_stop", False) and getattr(args, "budget_usd", None) is None:
        die("--budget-stop needs --budget-usd X (the budget to stop at)")
    return {"notify": bool(getattr(args, "notify", False)), "notify_url": url or None,
            "notify_compile_s": getattr(args, "notify_compile_s", 60.0),
            "budget_usd": getattr(args, "budget_usd", None), "budget_stop": bool(getattr(args, "budget_stop", False)),
            "hang_after_s": getattr(args, "hang_after_s", None)}


# ---------------------------------------------------------------- export, report, stacks

def add_parsers(sub) -> None:
    ex = sub.add_parser("export", help="a run as Trace Event JSON for ui.perfetto.dev or chrome://tracing, "
                        "or into TensorBoard, MLflow, W&B")
    ex.add_argument("run_dir", type=Path)
    ex.add_argument("--format", choices=("perfetto", "chrome", "tensorboard", "mlflow", "wandb"), default="perfetto",
                    help="perfetto (default) or chrome: both open the same Trace Event Format JSON, so both write it; "
                         "tensorboard, mlflow, wandb: the run's figures there (docs/sinks.md)")
    ex.add_argument("-o", "--output", required=True,  # text: a sink's URI is no path (http://h:5000)
                    help="the file to write (- for stdout); the folder, tracking URI or W&B project of a sink")
    ex.add_argument("--from-step", type=whole(0, MAX_STEPS), metavar="N", help="steps from N on")
    ex.add_argument("--to-step", type=whole(0, MAX_STEPS), metavar="N", help="steps up to N (included)")
    ex.set_defaults(fn=cmd_export)

    st = sub.add_parser("stacks", help="every rank's Python stacks of a live run, and which rank stands elsewhere")
    st.add_argument("run", nargs="?", help="run id, its folder, or an id prefix (default: the latest live run)")
    st.add_argument("--no-py-spy", action="store_true", help="use the probe's faulthandler dump even where py-spy works")
    st.set_defaults(fn=cmd_stacks)

    rp = sub.add_parser("report", help="one self-contained HTML report of one run or several: -o report.html")
    rp.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    rp.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    rp.set_defaults(fn=cmd_report)


def cmd_export(args) -> int:
    from neurondesk.reports.trace_export import ExportRange

    if args.format in SINK_FORMATS:
        return cmd_export_sink(args)
    args.output = Path(args.output)
    if args.from_step is not None and args.to_step is not None and args.to_step < args.from_step:
        die(f"--to-step {args.to_step} is before --from-step {args.from_step}")
    rng = ExportRange(args.from_step, args.to_step)
    try:
        if str(args.output) == "-":
            stats = export_run(args.run_dir, sys.stdout, rng)
        else:
            from neurondesk.store.summary_files import atomic_writer

            with atomic_writer(args.output) as f:  # the file appears whole, or not at all
                stats = export_run(args.run_dir, f, rng)
            stats.path = str(args.output)
    except (OSError, ValueError) as exc:
        die(str(exc))
    sys.stderr.write(f"neurondesk: {stats.words()}\n")
    return 0


def export_run(run_dir: Path, out, rng):
    """The run's reduced state (for the compiles' causes, the ranks, the evaluation phases) and
    one pass over its journal, written as Trace Event JSON."""
    from neurondesk.reports.trace_export import write_trace
    from neurondesk.sources.rebuild import state_from_run_dir
    from neurondesk.store.journal import iter_journal
    from neurondesk.store.rundir import RunPaths

    state, _ = state_from_run_dir(Path(run_dir))
    return write_trace(state, iter_journal(RunPaths(run_dir).events, []), out, rng)


def cmd_report(args) -> int:
    from neurondesk.core.rules.compare import compare
    from neurondesk.core.summary.build import run_summary
    from neurondesk.core.view.read_views import step_chart
    from neurondesk.lint.locate import annotate, located_memory
    from neurondesk.reports.html_report import ReportRun, render
    from neurondesk.sources.rebuild import state_from_run_dir
    from neurondesk.store.summary_files import write_atomic

    runs = []
    for text in args.runs:
        folder = resolve_run(str(text))
        try:
            state, problems = state_from_run_dir(folder)
        except (OSError, ValueError) as exc:
            die(str(exc))
        for p in problems[:3]:
            sys.stderr.write(f"neurondesk: {folder}/events.jsonl line {p.line}: {p.error} (skipped)\n")
        summary = run_summary(state)
        annotate(summary.advice)  # as `neurondesk summary` says it: does lint find each line
        if summary.memory_creep is not None:
            summary.memory_creep = located_memory(summary.memory_creep)
        runs.append(ReportRun(summary, step_chart(state, points=600), list(state.loss_history),
                              str(folder)))
    comparison = compare([r.summary for r in runs]) if len(runs) > 1 else None
    try:
        write_atomic(args.output, render(runs, comparison))
    except OSError as exc:
        die(f"cannot write {args.output}: {exc.strerror or exc}")
    sys.stderr.write(f"neurondesk: report of {len(runs)} run(s) written to {args.output}\n")
    return 0


def cmd_stacks(args) -> int:
    from neurondesk.sources.runs import RunNotFound, resolve_live_run
    from neurondesk.sources.stacks import StacksUnavailable, stacks_report

    try:  # where Flight Recorder is on, the collective each rank is blocked in comes first
        text, _ = stacks_report(resolve_live_run(args.run), use_py_spy=not args.no_py_spy)
    except (RunNotFound, StacksUnavailable) as exc:
        die(str(exc))
    sys.stdout.write(text)
    return 0
