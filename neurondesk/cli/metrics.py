"""The Prometheus options of `run`, `demo`, `replay` and `attach` (many nodes: docs/fleet.md): where to
serve OpenMetrics, the job and node labels, the Prometheus the console reads the whole job from."""

from __future__ import annotations

import argparse
import sys

from neurondesk.cli.args import LABEL_SAFE, number
from neurondesk.cli.errors import die


def add_metrics_options(p: argparse.ArgumentParser) -> None:
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
        g.add_argument("--metrics-grace", type=number(0, 86400), default=60.0, metavar="SECONDS",
                       help="after the run, serve its final figures this long (default 60: two scrapes at 30 s)")


def metrics_settings(args) -> tuple[str | None, str | None, str | None]:
    """(address, --job, --node) (None: not given; the run's identity then comes from the launcher's
    variables, core/events/job_identity.py); a bad address ends here, with a warning on stderr for one that is not loopback."""
    from neurondesk.exporter.endpoint import parse_metrics_addr

    text = getattr(args, "metrics_addr", None)
    if text:
        try:
            addr = parse_metrics_addr(text)
        except ValueError as exc:
            die(str(exc))
        if not addr.loopback:
            sys.stderr.write(f"neurondesk: warning: --metrics-addr {text} serves this run's metrics beyond this "
                             "machine (no authentication); firewall it to your Prometheus\n")
    job, node = getattr(args, "job", None), getattr(args, "node", None)
    for flag, value in (("--job", job), ("--node", node)):
        if value is not None and not LABEL_SAFE.match(value):
            die(f"{flag} {value[:80]!r}: give 1 to 128 characters without quotes, backslashes or newlines")
    return text, job, node


def exporter(args):
    """A started MetricsExporter for a viewer's own state (attach, replay), or None."""
    from neurondesk.exporter.endpoint import MetricsExporter, parse_metrics_addr

    text, job, node = metrics_settings(args)
    if not text:
        return None
    started = MetricsExporter(parse_metrics_addr(text), job, node)
    try:
        started.start()
    except OSError as exc:
        die(f"--metrics-addr {text}: cannot serve there ({exc.strerror or exc}); choose another port")
    return started
