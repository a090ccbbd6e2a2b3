"""The `neurondesk` command line."""

from __future__ import annotations

import argparse
import sys

from neurondesk.cli import checks, history, job, prices, reports, run, share, watch
from neurondesk.cli.args import Parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="neurondesk", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    # the order of --help and docs/cli.md
    run.add_parsers(sub)  # run, demo
    reports.add_parsers(sub)  # summary, advise
    watch.add_parsers(sub)  # replay, attach, fleet
    history.add_parsers(sub)  # ls, compare, history, reindex
    prices.add_parsers(sub)  # prices
    checks.add_parsers(sub)  # devices, doctor, lint
    share.add_parsers(sub)  # export, stacks, report
    job.add_parsers(sub)  # job summary, job report, job export
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
