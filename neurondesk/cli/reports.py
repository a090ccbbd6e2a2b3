"""One finished run's report on stdout, rebuilt from its journal: `summary` (md, json, csv, text) and
`advise` (what to change in the script, costed)."""

from __future__ import annotations

import sys
from pathlib import Path

from neurondesk.cli.errors import die
from neurondesk.core.summary.types import Summary


def _rebuilt_summary(run_dir) -> Summary:
    """A run's summary rebuilt from its journal (or its fallback), with what was skipped or is
    missing said on stderr."""
    from neurondesk.sources.rebuild import summary_from_run_dir
    from neurondesk.sources.replay import recording_gap
    from neurondesk.sources.runs import remove_socket_dir

    remove_socket_dir(run_dir)  # its recorder killed with SIGKILL left its socket folder behind
    notes: list[str] = []
    try:
        summary, problems = summary_from_run_dir(run_dir, notes=notes)
    except (OSError, ValueError) as exc:
        die(str(exc))
    for note in notes:
        sys.stderr.write(f"neurondesk: {note}\n")
    for p in problems[:5]:
        sys.stderr.write(f"neurondesk: {run_dir}/events.jsonl line {p.line}: {p.error} (skipped)\n")
    gap = recording_gap(run_dir, summary)
    if gap:
        sys.stderr.write(f"neurondesk: {gap}\n")
    return summary


def cmd_summary(args) -> int:
    from neurondesk.lint.locate import annotate, located_memory
    from neurondesk.reports.summary_writer import WRITERS

    summary = _rebuilt_summary(args.run_dir)
    annotate(summary.advice)  # does lint find each value read / shape change at its line
    if summary.memory_creep is not None:  # and the list a creeping rank appends its tensors to
        summary.memory_creep = located_memory(summary.memory_creep)
    sys.stdout.write(WRITERS[args.format](summary))
    return 0


def cmd_advise(args) -> int:
    import json

    from neurondesk.lint.locate import annotate
    from neurondesk.reports.advice_text import advice_text

    summary = _rebuilt_summary(args.run_dir)
    annotate(summary.advice)
    if args.format == "json":
        sys.stdout.write(json.dumps(summary.advice, indent=2) + "\n")
    else:
        sys.stdout.write(advice_text(summary.advice))
    return 0


def add_parsers(sub) -> None:
    summ = sub.add_parser("summary", help="rebuild a run's summary from its journal")
    summ.add_argument("run_dir", type=Path)
    summ.add_argument("--format", choices=("md", "json", "csv", "text"), default="md")
    summ.set_defaults(fn=cmd_summary)

    adv = sub.add_parser("advise", help="what to change in the script, costed on a finished run: neurondesk advise RUN_DIR")
    adv.add_argument("run_dir", type=Path)
    adv.add_argument("--format", choices=("text", "json"), default="text")
    adv.set_defaults(fn=cmd_advise)
