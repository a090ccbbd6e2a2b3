"""The `neurondesk` command line."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path

import platformdirs

REPO_ROOT = Path(__file__).resolve().parent.parent
DEMO_WORKLOAD = REPO_ROOT / "workloads" / "train.py"


def _die(msg: str, code: int = 2) -> None:
    from neurondesk.reports.safe_text import clean  # a message may quote a path, a line, a command

    sys.stderr.write(f"neurondesk: {clean(msg, sgr=True)}\n")
    raise SystemExit(code)


# Upper bounds of the numeric options: far past any real run, low enough that no figure made from
# them overflows or prints as 300 digits (a trillion steps, $100,000 an hour, a year of seconds).
MAX_STEPS = 10**12
MAX_PER_STEP = 10**12  # samples or tokens in one step
MAX_PRICE_PER_HOUR = 100_000.0
_LABEL_SAFE = re.compile(r'^[^"\\\n]{1,128}$')  # a Prometheus label value fleet can select on
MAX_SECONDS = 366 * 86400.0
MAX_RATE = 1e15  # samples/s
MAX_LOSS = 1e12


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line and a pointer to --help, not the whole usage block."""

    def error(self, message: str):
        from neurondesk.reports.safe_text import clean

        self.exit(2, f"neurondesk: {clean(message)} (see `{self.prog} --help`)\n")


def _whole(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text) if len(text) <= 40 else None  # int() of a 10,000-digit string is slow
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            bounds = f"of at least {minimum}" if maximum is None else f"from {minimum} to {maximum:,}"
            raise argparse.ArgumentTypeError(f"expected a whole number {bounds}, got {text[:40]!r}")
        return value
    parse.__name__ = "whole number"
    return parse


def _number(minimum: float | None = None, maximum: float | None = None):
    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if (not math.isfinite(value) or (minimum is not None and value < minimum)
                or (maximum is not None and value > maximum)):
            if maximum is not None:
                bounds = f" from {minimum:g} to {maximum:,g}" if minimum is not None else f" of at most {maximum:,g}"
            else:
                bounds = "" if minimum is None else f" of at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"expected a finite number{bounds}, got {text[:40]!r}")
        return value
    parse.__name__ = "number"
    return parse


def _add_metrics_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Prometheus (many nodes: see deploy/)")
    g.add_argument("--metrics-addr", metavar="[HOST:]PORT",
                   help="serve OpenMetrics on this address (a bare port: 127.0.0.1; another host is warned about)")
    g.add_argument("--job", metavar="ID", help="the job id (default: the launcher's: torchrun's --rdzv-id "
                   "(TORCHELASTIC_RUN_ID), else SLURM_JOB_ID; see docs/fleet.md)")
    g.add_argument("--node", metavar="NAME", help="the node's name (default: SLURMD_NODENAME, else this host's name)")
    if not p.prog.endswith(" replay"):
        g.add_argument("--prometheus", metavar="URL", help="the console shows the whole job's state as this Prometheus "
                       "has it (the slow node, compile skew, the failed node: docs/fleet.md)")
    if p.prog.endswith(" run"):
        g.add_argument("--metrics-grace", type=_number(0, 86400), default=60.0, metavar="SECONDS",
                       help="after the run, serve its final figures this long (default 60: two scrapes at 30 s)")


def _metrics_settings(args) -> tuple[str | None, str | None, str | None]:
    """(address, --job, --node) (None: not given; the run's identity then comes from the launcher's
    variables, core/events/job_identity.py); a bad address ends here, with a warning on stderr for one that is not loopback."""
    from neurondesk.recorder.metrics_http import parse_metrics_addr

    text = getattr(args, "metrics_addr", None)
    if text:
        try:
            addr = parse_metrics_addr(text)
        except ValueError as exc:
            _die(str(exc))
        if not addr.loopback:
            sys.stderr.write(f"neurondesk: warning: --metrics-addr {text} serves this run's metrics beyond this "
                             "machine (no authentication); firewall it to your Prometheus\n")
    job, node = getattr(args, "job", None), getattr(args, "node", None)
    for flag, value in (("--job", job), ("--node", node)):
        if value is not None and not _LABEL_SAFE.match(value):
            _die(f"{flag} {value[:80]!r}: give 1 to 128 characters without quotes, backslashes or newlines")
    return text, job, node


def _exporter(args):
    """A started MetricsExporter for a viewer's own state (attach, replay), or None."""
    from neurondesk.recorder.metrics_http import MetricsExporter, parse_metrics_addr

    text, job, node = _metrics_settings(args)
    if not text:
        return None
    exporter = MetricsExporter(parse_metrics_addr(text), job, node)
    try:
        exporter.start()
    except OSError as exc:
        _die(f"--metrics-addr {text}: cannot serve there ({exc.strerror or exc}); choose another port")
    return exporter


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--headless", action="store_true", help="no console: a status line, then the summary")
    p.add_argument("--detach", action="store_true",
                   help="start the run and return at once (print its folder); watch it with `neurondesk attach`")
    p.add_argument("--instance-type", help="EC2 instance type for pricing (default: ask the EC2 metadata service)")
    p.add_argument("--price-per-hour", type=_number(0, MAX_PRICE_PER_HOUR), help="USD per hour; overrides the price table")
    p.add_argument("--warmup-steps", type=_whole(0, MAX_STEPS), default=5,
                   help="steps excluded from steady state (default 5)")
    p.add_argument("--target-loss", type=_number(-MAX_LOSS, MAX_LOSS), help="report the steps taken to reach this loss")
    p.add_argument("--samples-per-step", type=_whole(1, MAX_PER_STEP), help="override the samples per step the probe sees")
    p.add_argument("--tokens-per-step", type=_whole(1, MAX_PER_STEP), help="override the tokens per step the probe sees")
    p.add_argument("--steps", type=_whole(1, MAX_STEPS), dest="steps_requested",
                   help="steps the workload will run (for projections)")
    p.add_argument("--run-dir", type=Path, help="folder for this run (default: a new one under the user data dir)")
    p.add_argument("--force", action="store_true",
                   help="with --run-dir: a folder that already holds a run is taken; its files move to previous-TIME/")
    p.add_argument("--neuron-monitor-replay", metavar="FILE",
                   help="feed a recorded neuron-monitor stream (JSON lines) instead of running neuron-monitor")
    p.add_argument("--neuron-observer", metavar="URL",
                   help="also read Neuron Observer's Prometheus endpoint (trn2/trn3), e.g. http://127.0.0.1:9100/metrics")
    p.add_argument("--graph-stats", metavar="DIR",
                   help="also read TorchNeuron's graph_stats CSVs (TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats) in DIR")
    p.add_argument("--neuron-profile", action="store_true",
                   help="capture a Neuron Explorer system profile (NEURON_RT_INSPECT_*) into the run folder's "
                        "neuron-profile/; the summary says how to open it")
    _add_metrics_options(p)
    g = p.add_argument_group("CI gate (exit status 3 when a check fails; any threshold implies --check)")
    g.add_argument("--check", action="store_true", help="smoke test: at least one step (all requested steps) ran")
    g.add_argument("--max-recompiles-after-warmup", type=_whole(0, MAX_STEPS), metavar="N",
                   help="fail above N recompiles after warm-up")
    g.add_argument("--loss-finite", action="store_true", help="fail when no loss was seen or a loss was nan/inf")
    g.add_argument("--max-first-compile-s", type=_number(0, MAX_SECONDS), metavar="S",
                   help="fail when the first compile took over S s")
    g.add_argument("--min-samples-per-s", type=_number(0, MAX_RATE), metavar="X", help="fail below X steady samples/s")
    from neurondesk.cli_share import add_alert_options

    add_alert_options(p)  # --notify, --notify-url, --budget-usd, --hang-after ...
    from neurondesk.cli_sinks import add_sink_options

    add_sink_options(p)  # --tensorboard, --mlflow, --wandb


def _price(args) -> tuple[str | None, float | None, str]:
    from neurondesk.clients.imds import detect_instance
    from neurondesk.core.node.prices import resolve_price
    from neurondesk.store.price_files import load_price_table

    instance = args.instance_type
    imds_note = ""
    if instance is None and args.price_per_hour is None:
        found = detect_instance()
        instance = found.instance_type
        if instance is None:
            imds_note = f" ({found.detail})"
    table = load_price_table(Path(platformdirs.user_config_dir("neurondesk")) / "prices.json")
    for warning in table.warnings:
        sys.stderr.write(f"neurondesk: {warning}\n")
    if args.instance_type is not None:
        _warn_unknown_instance(args.instance_type, args.price_per_hour is not None, table)
    try:
        quote = resolve_price(instance, args.price_per_hour, table)
    except ValueError as exc:
        _die(str(exc))
    return quote.instance_type, quote.price_per_hour, quote.source + imds_note


def _warn_unknown_instance(text: str, priced: bool, table) -> None:
    """One warning at the start for an --instance-type the price table does not know, naming the
    nearest known ones: the run would go unpriced (or without MFU) without a word."""
    import difflib

    from neurondesk.reports.safe_text import clean

    it = text.strip().lower()
    if it in table.instances:
        return
    known = sorted(table.instances)
    near = difflib.get_close_matches(it, known, n=3, cutoff=0.6)
    if not near:
        family = it.split(".", 1)[0]
        near = [k for k in known if k.split(".", 1)[0] == family][:3]
    what = ("it is used for MFU only, which stays unknown" if priced
            else "the run goes unpriced unless you pass --price-per-hour")
    hint = f"nearest known: {', '.join(near)}" if near else "`neurondesk prices` lists the known types"
    sys.stderr.write(f"neurondesk: warning: unknown --instance-type {clean(text)[:60]!r} (not in the price "
                     f"table): {what}; {hint}\n")


def _options(args, command: list[str]):
    from neurondesk.cli_share import alert_options
    from neurondesk.cli_sinks import sink_options
    from neurondesk.recorder.options import RunOptions

    instance, price, source = _price(args)
    metrics_addr, job_id, node = _metrics_settings(args)
    return RunOptions(
        instance_type=instance, price_per_hour=price, price_source=source,
        warmup_steps=args.warmup_steps, target_loss=args.target_loss,
        samples_per_step=args.samples_per_step, tokens_per_step=args.tokens_per_step,
        steps_requested=args.steps_requested, run_dir=args.run_dir, force=args.force,
        neuron_monitor_replay=args.neuron_monitor_replay,
        neuron_observer=getattr(args, "neuron_observer", None), graph_stats=getattr(args, "graph_stats", None),
        neuron_profile=getattr(args, "neuron_profile", False),
        metrics_addr=metrics_addr, job_id=job_id, node=node, checks=_thresholds(args), **alert_options(args),
        metrics_grace_s=getattr(args, "metrics_grace", 60.0),
        **sink_options(args),
    )


def _thresholds(args):
    from neurondesk.core.rules.checks import Thresholds

    t = Thresholds(args.max_recompiles_after_warmup, args.loss_finite, args.max_first_compile_s,
                   args.min_samples_per_s)
    return t if args.check or t != Thresholds() else None


def _gate(source, summary_written: bool, thresholds, code: int) -> int:
    """Failed checks: one line each on stderr; exit 3 if the workload itself exited 0.

    A workload that failed keeps its own exit status (a crash is worse than a failed check)."""
    from neurondesk.core.rules.checks import describe, evaluate
    from neurondesk.core.summary.build import build_summary

    if thresholds is None or not summary_written:
        return code
    failed = evaluate(build_summary(source.state), thresholds)
    for line in failed:
        sys.stderr.write(f"neurondesk check failed: {line}\n")
    if not failed:
        sys.stderr.write(f"neurondesk check passed: {describe(thresholds)}\n")
    return code if code != 0 else (3 if failed else 0)


def _run_session(command: list[str], args, env: dict[str, str] | None = None) -> int:
    """Launch a recorder that owns the run, then watch it (console or status line) unless --detach."""
    from neurondesk.sources.follow import FollowSource
    from neurondesk.sources.launch import LaunchError, launch_recorder
    from neurondesk.store.rundir import RunDirRefused
    from neurondesk.views.headless import start_failed

    thresholds = _thresholds(args)
    options = _options(args, command)
    options.env = env
    try:
        launched = launch_recorder(command, options)
    except (FileExistsError, RunDirRefused) as exc:
        _die(str(exc))
    except LaunchError as exc:
        _die(str(exc), 1)
    except OSError as exc:  # the run folder cannot be made or written: say so before anything runs
        where = exc.filename or options.run_dir or "the run folder"
        _die(f"cannot write the run folder {where}: {exc.strerror or exc}; choose a writable --run-dir "
             "or set NEURONDESK_HOME to a writable folder")
    if args.detach:
        sys.stdout.write(f"{launched.paths.dir}\n")
        return 0
    source = FollowSource(launched.paths.dir, recorder=launched.process)
    code = _watch(source, headless=args.headless, notify=args.notify, job_lines=_job_lines(args, source))
    if start_failed(source.state):
        source.finish()
        for note in source.state.notices:  # the workload never started: say why, as one line
            if note.level == "error":
                _die(f"{note.message} (run folder kept: {launched.paths.dir})", 127)
    return _gate(source, source.summary_path.exists(), thresholds, code)


def _job_lines(args, source):
    """`--prometheus URL`: (read, URL) for the console's job lines, the job being this run's (--job, else
    its identity as the workers said it); None without the option."""
    url = getattr(args, "prometheus", None)
    if not url:
        return None
    from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI, PrometheusError
    from neurondesk.views.fleet import read_job_lines

    try:
        reader = FleetReader(PrometheusAPI(url, timeout_s=3.0))
    except PrometheusError as exc:
        _die(str(exc))

    def read() -> list[str]:
        job = getattr(args, "job", None) or source.state.parts.job.identity().job_id or None
        return read_job_lines(reader.read(), job)

    return read, reader.api.shown  # the console's label: no credential


def _watch(source, headless: bool, notify: bool = False, job_lines=None) -> int:
    """``notify``: ring the terminal on each alert the recorder journals (views/terminal_notify.py)."""
    if headless or not sys.stdout.isatty():
        from neurondesk.views.headless import HeadlessPrinter

        return HeadlessPrinter(source, notify=notify).run()
    from neurondesk.views.console.app import run_console

    return run_console(source, notify=notify, job_lines=job_lines)


def cmd_run(args) -> int:
    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        _die("nothing to run: give the workload after --, e.g. neurondesk run -- python train.py")
    return _run_session(command, args)


def cmd_demo(args) -> int:
    if not DEMO_WORKLOAD.exists():
        _die(f"the bundled workload is missing ({DEMO_WORKLOAD}); run neurondesk from its source checkout")
    command = [sys.executable, str(DEMO_WORKLOAD), "--preset", "demo", "--steps", str(args.demo_steps),
               "--eval-every", "100",  # an evaluation phase, shown apart from training
               "--save-every", "100"]  # checkpoints as scripts write them: whole model, optimizer, EMA deepcopy
    command += args.extra
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")
    if args.steps_requested is None:
        args.steps_requested = args.demo_steps
    if args.instance_type is None and args.price_per_hour is None:
        args.instance_type = "trn1.2xlarge"  # price the demo as if it ran on the smallest trn1
    return _run_session(command, args, env)


def _rebuilt_summary(run_dir) -> dict:
    """A run's summary rebuilt from its journal (or its fallback), with what was skipped or is
    missing said on stderr."""
    from neurondesk.sources.replay import recording_gap, summary_from_run_dir
    from neurondesk.sources.runs import remove_socket_dir

    remove_socket_dir(run_dir)  # its recorder killed with SIGKILL left its socket folder behind
    notes: list[str] = []
    try:
        summary, problems = summary_from_run_dir(run_dir, notes=notes)
    except (OSError, ValueError) as exc:
        _die(str(exc))
    for note in notes:
        sys.stderr.write(f"neurondesk: {note}\n")
    for p in problems[:5]:
        sys.stderr.write(f"neurondesk: {run_dir}/events.jsonl line {p.line}: {p.error} (skipped)\n")
    gap = recording_gap(run_dir, summary)
    if gap:
        sys.stderr.write(f"neurondesk: {gap}\n")
    return summary


def cmd_summary(args) -> int:
    from neurondesk.lint.locate import annotate, annotate_memory
    from neurondesk.reports.summary_writer import WRITERS

    summary = _rebuilt_summary(args.run_dir)
    annotate(summary.get("advice") or [])  # does lint find each value read / shape change at its line
    annotate_memory(summary.get("memory_creep"))  # and the list a creeping rank appends its tensors to
    sys.stdout.write(WRITERS[args.format](summary))
    return 0


def cmd_advise(args) -> int:
    import json

    from neurondesk.lint.locate import annotate
    from neurondesk.reports.advice_text import advice_text

    summary = _rebuilt_summary(args.run_dir)
    annotate(summary.get("advice") or [])
    if args.format == "json":
        sys.stdout.write(json.dumps(summary["advice"], indent=2) + "\n")
    else:
        sys.stdout.write(advice_text(summary["advice"]))
    return 0


def cmd_replay(args) -> int:
    if not 0 <= args.speed <= 1e6:  # nan too
        _die(f"--speed {args.speed}: give a positive factor up to 1,000,000 (2 = twice as fast), "
             "or 0 for all at once")
    speed = 0.0 if args.instant else args.speed
    if not args.headless and not sys.stdout.isatty():
        _die(f"replay plays a run in the console and needs a terminal; for text, "
             f"use: neurondesk summary {args.run_dir} --format text (or replay --headless)")
    from neurondesk.recorder.metrics_serve import publish_on_poll, run_headless_replay
    from neurondesk.sources.replay import ReplaySource

    try:
        source = ReplaySource(args.run_dir, speed=speed, until=args.until)
    except (OSError, ValueError) as exc:
        _die(str(exc))
    exporter = _exporter(args)
    if args.headless:
        return run_headless_replay(source, exporter, sys.stdout)
    from neurondesk.views.console.app import run_replay

    if exporter is not None:
        publish_on_poll(source, exporter)
    try:
        return run_replay(source)
    finally:
        if exporter is not None:
            exporter.close()


def cmd_attach(args) -> int:
    from neurondesk.sources.follow import FollowSource
    from neurondesk.sources.runs import RunNotFound, resolve_live_run

    notes: list[str] = []  # the run was moved while live; the registry of live runs was refused
    try:
        run_dir = resolve_live_run(args.run, notes=notes)
    except RunNotFound as exc:
        _die(str(exc))
    finally:
        _say(notes)
    source = FollowSource(run_dir, attached=True)
    for note in source.notes:  # a checkpoint that could not be used: said once, before the view
        sys.stderr.write(f"neurondesk: {note}\n")
    exporter = _exporter(args)
    if exporter is None:
        return _watch(source, headless=args.headless, notify=args.notify, job_lines=_job_lines(args, source))
    from neurondesk.recorder.metrics_serve import publish_on_poll

    publish_on_poll(source, exporter)
    try:
        return _watch(source, headless=args.headless, notify=args.notify, job_lines=_job_lines(args, source))
    finally:
        exporter.close()


def cmd_fleet(args) -> int:
    from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI, PrometheusError
    from neurondesk.views.fleet import FleetApp, format_table, to_json

    try:
        reader = FleetReader(PrometheusAPI(args.prometheus), job=args.job, lookback=args.lookback)
        if not args.once:
            return FleetApp(reader.read, reader.api.shown, refresh_s=args.refresh, job=args.job).run() or 0
        read = reader.read()
    except PrometheusError as exc:
        _die(str(exc), 1)
    sys.stdout.write(to_json(read, args.job) if args.format == "json" else format_table(read, args.job))
    return 0


def cmd_ls(args) -> int:
    from neurondesk.reports.runs_list import format_runs
    from neurondesk.sources.runs import finished_runs, live_runs, sweep_socket_dirs

    sweep_socket_dirs()  # socket folders of recorders killed with SIGKILL
    notes: list[str] = []  # runs moved or deleted while live; a refused registry of live runs
    ended: list = []  # runs whose recorder is gone, settled on the way (their index row written)
    live = live_runs(notes=notes, ended=ended)
    _say(notes)
    sys.stdout.write(format_runs(live, finished_runs(limit=args.last, ended=ended)))
    return 0


def _say(notes: list[str]) -> None:
    from neurondesk.reports.safe_text import clean  # paths and ids are outside text

    for note in notes:
        sys.stderr.write(f"neurondesk: {clean(note)}\n")


def cmd_devices(args) -> int:
    import json

    from neurondesk.collectors.devices.inventory import collect_inventory, format_inventory_text
    from neurondesk.collectors.devices.neuron_ls import NeuronLsFileTooLarge

    try:
        inventory = collect_inventory(neuron_ls_file=args.from_file)
    except NeuronLsFileTooLarge as exc:
        _die(str(exc))
    if args.from_file is not None and inventory["neuron"] is None:  # nothing found in the file
        _die(inventory["neuron_reason"] or f"{args.from_file}: no neuron-ls output found")
    sys.stdout.write(json.dumps(inventory, indent=2, default=str) + "\n" if args.json else format_inventory_text(inventory))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="neurondesk", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    run = sub.add_parser("run", help="run a workload under neurondesk: neurondesk run [options] -- CMD ...")
    _add_run_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="the workload command, after --")
    run.set_defaults(fn=cmd_run)

    demo = sub.add_parser("demo", help="the bundled demo workload (XLA on this CPU) under neurondesk")
    _add_run_options(demo)
    demo.add_argument("--demo-steps", type=_whole(1, MAX_STEPS), default=300, help="steps of the demo workload (default 300)")
    demo.add_argument("extra", nargs=argparse.REMAINDER, help="extra workload flags after --")
    demo.set_defaults(fn=cmd_demo)

    summ = sub.add_parser("summary", help="rebuild a run's summary from its journal")
    summ.add_argument("run_dir", type=Path)
    summ.add_argument("--format", choices=("md", "json", "csv", "text"), default="md")
    summ.set_defaults(fn=cmd_summary)

    adv = sub.add_parser("advise", help="what to change in the script, costed on a finished run: neurondesk advise RUN_DIR")
    adv.add_argument("run_dir", type=Path)
    adv.add_argument("--format", choices=("text", "json"), default="text")
    adv.set_defaults(fn=cmd_advise)

    rep = sub.add_parser("replay", help="play a recorded run through the console: neurondesk replay RUN_DIR")
    rep.add_argument("run_dir", type=Path, help="a run folder (holding events.jsonl)")
    rep.add_argument("--speed", type=float, default=1.0, help="times real time (default 1; 0 = all at once)")
    rep.add_argument("--instant", action="store_true", help="all at once (same as --speed 0)")
    rep.add_argument("--until", type=_number(0, MAX_SECONDS), help="stop the replay this many seconds into the recording")
    rep.add_argument("--headless", action="store_true",
                     help="no console: status lines (with --metrics-addr: serve the replay as if live, then its "
                          "final figures until interrupted)")
    _add_metrics_options(rep)
    rep.set_defaults(fn=cmd_replay)

    att = sub.add_parser("attach", help="watch a live run: neurondesk attach [RUN] (default: the latest)")
    att.add_argument("run", nargs="?", help="run id, its folder, or an id prefix (default: the latest live run)")
    att.add_argument("--headless", action="store_true", help="the status line instead of the console")
    att.add_argument("--notify", action="store_true",
                     help="ring this terminal (bell, OSC 777 / OSC 9) on each alert the recorder journals from now on")
    _add_metrics_options(att)
    att.set_defaults(fn=cmd_attach)

    fl = sub.add_parser("fleet", help="every node of a job, as Prometheus has them: neurondesk fleet --prometheus URL")
    fl.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus's base URL, e.g. http://127.0.0.1:9090")
    fl.add_argument("--job", metavar="ID", help="only this job_id (default: every job)")
    fl.add_argument("--once", action="store_true", help="print the table once and exit (for scripts)")
    fl.add_argument("--format", choices=("table", "json"), default="table", help="with --once (default table)")
    fl.add_argument("--refresh", type=_number(0.1, 3600), default=1.0, help="seconds between refreshes (default 1)")
    fl.add_argument("--lookback", default="15m",
                    help="how long a node that stopped reporting stays listed, as a Prometheus duration (default 15m)")
    fl.set_defaults(fn=cmd_fleet)

    ls = sub.add_parser("ls", help="live runs, then the most recent finished ones")
    ls.add_argument("--last", type=_whole(0, 10**6), default=10, help="finished runs to list (default 10)")
    ls.set_defaults(fn=cmd_ls)

    from neurondesk.cli_reports import add_parsers

    add_parsers(sub)  # compare, history (and the cost board), prices
    devs = sub.add_parser("devices", help="what is on this machine: Neuron devices, GPUs, CPU")
    devs.add_argument("--json", action="store_true")
    devs.add_argument("--from-file", metavar="PATH", help="read a saved neuron-ls output (JSON or table)")
    devs.set_defaults(fn=cmd_devices)
    from neurondesk.cli_checks import add_parsers as add_check_parsers

    add_check_parsers(sub)  # doctor, lint
    from neurondesk.cli_share import add_parsers as add_share_parsers

    add_share_parsers(sub)  # export, report, stacks
    from neurondesk.cli_job import add_parsers as add_job_parsers

    add_job_parsers(sub)  # job summary, job report, job export
    return p


# Commands that print reports: all they write (stdout and stderr) goes through safe_text.CleanStream.
# run, demo, attach and replay draw a console or a status line; they make their own text safe.
REPORT_COMMANDS = frozenset({"summary", "advise", "compare", "history", "reindex", "prices", "ls", "devices",
                             "doctor", "lint", "export", "report", "stacks", "job"})


def _reports_cleaned(args) -> bool:
    return args.cmd in REPORT_COMMANDS or (args.cmd == "fleet" and args.once) or (
        args.cmd == "replay" and args.headless)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "extra", None) and args.extra[0] == "--":
        args.extra = args.extra[1:]
    if not _reports_cleaned(args):
        return args.fn(args) or 0
    from neurondesk.reports.safe_text import CleanStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = CleanStream(out), CleanStream(err)
    try:
        return args.fn(args) or 0
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":
    raise SystemExit(main())
