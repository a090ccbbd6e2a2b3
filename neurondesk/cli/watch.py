"""Watching: `replay` (a recorded run through the console), `attach` (a live run), `fleet` (every node of
a job, as Prometheus has them); and the view a run or an attach hands its source to."""

from __future__ import annotations

import sys
from pathlib import Path

from neurondesk.cli.args import MAX_SECONDS, number
from neurondesk.cli.errors import die, say
from neurondesk.cli.metrics import add_metrics_options, exporter


def job_lines(args, source):
    """`--prometheus URL`: (read, URL) for the console's job lines, the job being this run's (--job, else
    its identity as the workers said it); None without the option."""
    url = getattr(args, "prometheus", None)
    if not url:
        return None
    from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI, PrometheusError
    from neurondesk.core.view.read_views import job_identity
    from neurondesk.views.fleet import read_job_lines

    try:
        reader = FleetReader(PrometheusAPI(url, timeout_s=3.0))
    except PrometheusError as exc:
        die(str(exc))

    def read() -> list[str]:
        job = getattr(args, "job", None) or job_identity(source.state).job_id or None
        return read_job_lines(reader.read(), job)

    return read, reader.api.shown


def watch(source, headless: bool, notify: bool = False, job_lines=None) -> int:
    """``notify``: ring the terminal on each alert the recorder journals (views/terminal_notify.py)."""
    if headless or not sys.stdout.isatty():
        from neurondesk.lint.locate import located_memory
        from neurondesk.views.headless import HeadlessPrinter

        return HeadlessPrinter(source, notify=notify, locate_memory=located_memory).run()
    from neurondesk.views.console.app import run_console

    return run_console(source, notify=notify, job_lines=job_lines)


def cmd_replay(args) -> int:
    if not 0 <= args.speed <= 1e6:  # nan too
        die(f"--speed {args.speed}: give a positive factor up to 1,000,000 (2 = twice as fast), "
            "or 0 for all at once")
    speed = 0.0 if args.instant else args.speed
    if not args.headless and not sys.stdout.isatty():
        die(f"replay plays a run in the console and needs a terminal; for text, "
            f"use: neurondesk summary {args.run_dir} --format text (or replay --headless)")
    from neurondesk.exporter.viewer import publish_on_poll, run_headless_replay
    from neurondesk.sources.replay import ReplaySource

    try:
        source = ReplaySource(args.run_dir, speed=speed, until=args.until)
    except (OSError, ValueError) as exc:
        die(str(exc))
    served = exporter(args)
    if args.headless:
        return run_headless_replay(source, served, sys.stdout)
    from neurondesk.views.console.app import run_replay

    if served is not None:
        publish_on_poll(source, served)
    try:
        return run_replay(source)
    finally:
        if served is not None:
            served.close()


def cmd_attach(args) -> int:
    from neurondesk.sources.follow import FollowSource
    from neurondesk.sources.runs import RunNotFound, resolve_live_run

    notes: list[str] = []  # the run was moved while live; the registry of live runs was refused
    try:
        run_dir = resolve_live_run(args.run, notes=notes)
    except RunNotFound as exc:
        die(str(exc))
    finally:
        say(notes)
    source = FollowSource(run_dir, attached=True)
    for note in source.notes:  # a checkpoint that could not be used: said once, before the view
        sys.stderr.write(f"neurondesk: {note}\n")
    served = exporter(args)
    if served is None:
        return watch(source, headless=args.headless, notify=args.notify, job_lines=job_lines(args, source))
    from neurondesk.exporter.viewer import publish_on_poll

    publish_on_poll(source, served)
    try:
        return watch(source, headless=args.headless, notify=args.notify, job_lines=job_lines(args, source))
    finally:
        served.close()


def cmd_fleet(args) -> int:
    from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI, PrometheusError
    from neurondesk.views.fleet import FleetApp, format_table, to_json

    try:
        reader = FleetReader(PrometheusAPI(args.prometheus), job=args.job, lookback=args.lookback)
        if not args.once:
            return FleetApp(reader.read, reader.api.shown, refresh_s=args.refresh, job=args.job).run() or 0
        read = reader.read()
    except PrometheusError as exc:
        die(str(exc), 1)
    sys.stdout.write(to_json(read, args.job) if args.format == "json" else format_table(read, args.job))
    return 0


def add_parsers(sub) -> None:
    rep = sub.add_parser("replay", help="play a recorded run through the console: neurondesk replay RUN_DIR")
    rep.add_argument("run_dir", type=Path, help="a run folder (holding events.jsonl)")
    rep.add_argument("--speed", type=float, default=1.0, help="times real time (default 1; 0 = all at once)")
    rep.add_argument("--instant", action="store_true", help="all at once (same as --speed 0)")
    rep.add_argument("--until", type=number(0, MAX_SECONDS), help="stop the replay this many seconds into the recording")
    rep.add_argument("--headless", action="store_true",
                     help="no console: status lines (with --metrics-addr: serve the replay as if live, then its "
                          "final figures until interrupted)")
    add_metrics_options(rep)
    rep.set_defaults(fn=cmd_replay)

    att = sub.add_parser("attach", help="watch a live run: neurondesk attach [RUN] (default: the latest)")
    att.add_argument("run", nargs="?", help="run id, its folder, or an id prefix (default: the latest live run)")
    att.add_argument("--headless", action="store_true", help="the status line instead of the console")
    att.add_argument("--notify", action="store_true",
                     help="ring this terminal (bell, OSC 777 / OSC 9) on each alert the recorder journals from now on")
    add_metrics_options(att)
    att.set_defaults(fn=cmd_attach)

    fl = sub.add_parser("fleet", help="every node of a job, as Prometheus has them: neurondesk fleet --prometheus URL")
    fl.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus's base URL, e.g. http://127.0.0.1:9090")
    fl.add_argument("--job", metavar="ID", help="only this job_id (default: every job)")
    fl.add_argument("--once", action="store_true", help="print the table once and exit (for scripts)")
    fl.add_argument("--format", choices=("table", "json"), default="table", help="with --once (default table)")
    fl.add_argument("--refresh", type=number(0.1, 3600), default=1.0, help="seconds between refreshes (default 1)")
    fl.add_argument("--lookback", default="15m",
                    help="how long a node that stopped reporting stays listed, as a Prometheus duration (default 15m)")
    fl.set_defaults(fn=cmd_fleet)
