"""The command line of the sinks (docs/sinks.md): ``run --tensorboard DIR --mlflow URI --wandb PROJECT``,
and ``export RUN --format tensorboard|mlflow|wandb -o DIR|URI|PROJECT`` for a recorded run (its journal
replayed through the same reducer and frames a live recorder takes)."""

from __future__ import annotations

import argparse
import os
import sys

from neurondesk.cli.errors import die
from neurondesk.cli.history import resolve_run

SINK_FORMATS = ("tensorboard", "mlflow", "wandb")



def add_sink_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("where the team already looks (docs/sinks.md)")
    g.add_argument("--tensorboard", metavar="DIR",
                   help="write the run's figures as TensorBoard event files into DIR, live (tensorboard --logdir DIR)")
    g.add_argument("--mlflow", metavar="URI", nargs="?", const="",
                   help="log the run to MLflow: a tracking server (http(s)://...), databricks, file:DIR, "
                        "sqlite:///FILE or a local folder; alone: MLFLOW_TRACKING_URI. A server's credentials: "
                        "MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN, never on the "
                        "command line; MLFLOW_RUN_ID attaches to the script's own run")
    g.add_argument("--wandb", metavar="PROJECT",
                   help="log the run to Weights & Biases: offline (wandb sync later) unless logged in")


def _wandb_dir(env: dict[str, str]):
    """WANDB_DIR, to be refused before the run when it cannot be written (W&B would fall back to /tmp/wandb)."""
    from pathlib import Path

    return Path(env["WANDB_DIR"]) if env.get("WANDB_DIR") else None


def sink_options(args, env: dict[str, str] | None = None) -> dict:
    """RunOptions fields; a sink that cannot be had (library missing, W&B refusal) ends here, in one line."""
    from neurondesk.sinks.base import SinkError
    from neurondesk.sinks.choose import missing_library
    from neurondesk.sinks.uris import mlflow_target, password_warning
    from neurondesk.sinks.wandb_sink import refusal

    env = dict(os.environ if env is None else env)
    chosen = {kind: getattr(args, kind, None) or None for kind in SINK_FORMATS}
    if getattr(args, "mlflow", None) == "":  # --mlflow alone: MLFLOW_TRACKING_URI
        chosen["mlflow"] = ""
    for kind, value in chosen.items():
        if value is not None:
            why = missing_library(kind) or (refusal(env, _wandb_dir(env)) if kind == "wandb" else None)
            if why:
                die(why)
    if chosen["mlflow"] is not None:  # every URI MLflow takes, made absolute here, or refused before the run
        try:
            chosen["mlflow"] = mlflow_target(chosen["mlflow"], env).uri
        except SinkError as exc:
            die(str(exc))
        warning = password_warning(getattr(args, "mlflow", None))
        if warning:
            sys.stderr.write(f"neurondesk: {warning}\n")
    return chosen


def cmd_export_sink(args) -> int:
    """A recorded run into one sink, synchronously: a failure is one line and exit 1."""
    from neurondesk.core.reduce.state import RunState
    from neurondesk.core.summary.build import run_summary
    from neurondesk.reports.summary_writer import to_json, to_markdown
    from neurondesk.sinks.base import SinkError, scrub_end, scrub_info, sink_secrets, why
    from neurondesk.sinks.choose import make_sinks
    from neurondesk.sinks.frames import FrameTaker, replayed_frames, run_info
    from neurondesk.sinks.redact import argv_secrets
    from neurondesk.store.journal import iter_journal
    from neurondesk.store.rundir import SUMMARY_JSON, SUMMARY_MD, RunPaths

    folder = resolve_run(str(args.run_dir))
    target = str(args.output)
    try:
        sink = make_sinks(dict(os.environ), folder, **{args.format: target})[0]
    except SinkError as exc:
        die(str(exc).replace(f"--{args.format}", f"--format {args.format}"))
    state, taker, problems = RunState(), FrameTaker(), []
    frames = list(replayed_frames(iter_journal(RunPaths(folder).events, problems), state, taker))
    summary = run_summary(state)  # the journal's: the same figures the frames carry
    artifacts = {SUMMARY_JSON: to_json(summary), SUMMARY_MD: to_markdown(summary)}
    try:
        from neurondesk.recorder.sink_desk import report_html

        artifacts["report.html"] = report_html(state, folder)
        end, info = taker.end(state, state.last_t, artifacts), run_info(state)
        secrets = sink_secrets(sink, info)  # no secret of the environment or the command line sent
        sink.open(scrub_info(info, secrets))
        sink.write([*frames, end.frame])  # the last: summary.json's figures
        look = sink.close(scrub_end(end, secrets))
    except Exception as exc:  # noqa: BLE001 - the tool's own error, in one line
        die(f"export to {args.format} {sink.where}: {why(exc, sink.secrets + argv_secrets(state.command))}", 1)
    skipped = f"; {len(problems)} journal line(s) skipped" if problems else ""
    sys.stderr.write(f"neurondesk: {len(frames) + 1} frames of {folder} written to {args.format} "
                     f"{sink.where}{skipped}; {look}\n")
    return 0
