"""`neurondesk run -- CMD` and `neurondesk demo`: a recorder launched to own the run, then watched (the
console or a status line) unless --detach; the CI gate's checks on the summary at the end."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from neurondesk.cli.args import (
    MAX_LOSS,
    MAX_PER_STEP,
    MAX_PRICE_PER_HOUR,
    MAX_RATE,
    MAX_SECONDS,
    MAX_STEPS,
    number,
    whole,
)
from neurondesk.cli.errors import die
from neurondesk.cli.metrics import add_metrics_options, metrics_settings
from neurondesk.cli.prices import run_price
from neurondesk.cli.share import add_alert_options, alert_options
from neurondesk.cli.sinks import add_sink_options, sink_options
from neurondesk.cli.watch import job_lines, watch

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DEMO_WORKLOAD = REPO_ROOT / "workloads" / "train.py"
DEMO_INSTANCE = "trn2.48xlarge"
DEMO_PRICE_PER_HOUR = 35.76
DEMO_PRICE_NOTE = ("demo: trn2.48xlarge at VAN-2511's $35.76/hour (2025-11-30, us-east-2); the price table has "
                   "no us-east-1 on-demand trn2 price (see `neurondesk prices`)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--headless", action="store_true", help="no console: a status line, then the summary")
    p.add_argument("--detach", action="store_true",
                   help="start the run and return at once (print its folder); watch it with `neurondesk attach`")
    p.add_argument("--instance-type", help="EC2 instance type for pricing (default: ask the EC2 metadata service)")
    p.add_argument("--price-per-hour", type=number(0, MAX_PRICE_PER_HOUR), help="USD per hour; overrides the price table")
    p.add_argument("--warmup-steps", type=whole(0, MAX_STEPS), default=5,
                   help="steps excluded from steady state (default 5)")
    p.add_argument("--target-loss", type=number(-MAX_LOSS, MAX_LOSS), help="report the steps taken to reach this loss")
    p.add_argument("--samples-per-step", type=whole(1, MAX_PER_STEP), help="override the samples per step the probe sees")
    p.add_argument("--tokens-per-step", type=whole(1, MAX_PER_STEP), help="override the tokens per step the probe sees")
    p.add_argument("--steps", type=whole(1, MAX_STEPS), dest="steps_requested",
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
    add_metrics_options(p)
    g = p.add_argument_group("CI gate (exit status 3 when a check fails; any threshold implies --check)")
    g.add_argument("--check", action="store_true", help="smoke test: at least one step (all requested steps) ran")
    g.add_argument("--max-recompiles-after-warmup", type=whole(0, MAX_STEPS), metavar="N",
                   help="fail above N recompiles after warm-up")
    g.add_argument("--loss-finite", action="store_true", help="fail when no loss was seen or a loss was nan/inf")
    g.add_argument("--max-first-compile-s", type=number(0, MAX_SECONDS), metavar="S",
                   help="fail when the first compile took over S s")
    g.add_argument("--min-samples-per-s", type=number(0, MAX_RATE), metavar="X", help="fail below X steady samples/s")
    add_alert_options(p)  # --notify, --notify-url, --budget-usd, --hang-after ...
    add_sink_options(p)  # --tensorboard, --mlflow, --wandb


def _options(args, command: list[str]):
    from neurondesk.recorder.options import RunOptions

    instance, price, source = run_price(args)
    metrics_addr, job_id, node = metrics_settings(args)
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
        die(str(exc))
    except LaunchError as exc:
        die(str(exc), 1)
    except OSError as exc:  # the run folder cannot be made or written: say so before anything runs
        where = exc.filename or options.run_dir or "the run folder"
        die(f"cannot write the run folder {where}: {exc.strerror or exc}; choose a writable --run-dir "
            "or set NEURONDESK_HOME to a writable folder")
    if args.detach:
        sys.stdout.write(f"{launched.paths.dir}\n")
        return 0
    source = FollowSource(launched.paths.dir, recorder=launched.process)
    code = watch(source, headless=args.headless, notify=args.notify, job_lines=job_lines(args, source))
    if start_failed(source.state):
        source.finish()
        for note in source.state.notices:  # the workload never started: say why, as one line
            if note.level == "error":
                die(f"{note.message} (run folder kept: {launched.paths.dir})", 127)
    return _gate(source, source.summary_path.exists(), thresholds, code)


def cmd_run(args) -> int:
    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        die("nothing to run: give the workload after --, e.g. neurondesk run -- python train.py")
    return _run_session(command, args)


def cmd_demo(args) -> int:
    if not DEMO_WORKLOAD.exists():
        die(f"the bundled workload is missing ({DEMO_WORKLOAD}); run neurondesk from its source checkout")
    command = [sys.executable, str(DEMO_WORKLOAD), "--preset", "demo", "--steps", str(args.demo_steps),
               "--eval-every", "100",  # an evaluation phase, shown apart from training
               "--save-every", "100"]  # checkpoints as scripts write them: whole model, optimizer, EMA deepcopy
    command += args.extra
    env = dict(os.environ)
    env.setdefault("PJRT_DEVICE", "CPU")
    if args.steps_requested is None:
        args.steps_requested = args.demo_steps
    if args.instance_type is None and args.price_per_hour is None:
        # the demo is priced as TorchNeuron's machine, a trn2 (trn1 is the XLA path); the price table
        # has no us-east-1 on-demand trn2 price, so the demo takes one of the figures its note cites
        args.instance_type, args.price_per_hour = DEMO_INSTANCE, DEMO_PRICE_PER_HOUR
        args.price_note = DEMO_PRICE_NOTE
    return _run_session(command, args, env)


def add_parsers(sub) -> None:
    run = sub.add_parser("run", help="run a workload under neurondesk: neurondesk run [options] -- CMD ...")
    _add_run_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="the workload command, after --")
    run.set_defaults(fn=cmd_run)

    demo = sub.add_parser("demo", help="the bundled demo workload under neurondesk (TorchNeuron where installed, else XLA on this CPU)")
    _add_run_options(demo)
    demo.add_argument("--demo-steps", type=whole(1, MAX_STEPS), default=300, help="steps of the demo workload (default 300)")
    demo.add_argument("extra", nargs=argparse.REMAINDER, help="extra workload flags after --")
    demo.set_defaults(fn=cmd_demo)
