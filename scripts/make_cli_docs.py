"""docs/cli.md from the command line's own parser: every command and every option, with its help.

    .venv/bin/python scripts/make_cli_docs.py          # rewrite docs/cli.md
    .venv/bin/python scripts/make_cli_docs.py --check  # exit 1 when docs/cli.md is stale

tests/contracts/test_docs.py runs the check, so an option added without regenerating this page fails there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "cli.md"


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """The parser's subcommands: name, parser and help line each, in the order they were added."""
    for action in parser._actions:  # argparse keeps them here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
    return []


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", r"\|")


def command_section(name: str, parser: argparse.ArgumentParser, summary: str, depth: int = 2) -> list[str]:
    out = [f"{'#' * depth} `neurondesk {name}`", ""]
    if summary:
        out += [_cell(summary), ""]
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue  # help, subcommands, options kept off the help on purpose
        flags = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}` (positional)"
        choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
        text = (action.help or "").replace("%%", "%")  # argparse's escape for a literal %
        rows.append(f"| {flags} | {_cell(text + choices)} |")
    if rows:
        out += ["| option | what it does |", "|---|---|", *rows, ""]
    for sub_name, sub, sub_summary in _commands(parser):
        out += command_section(f"{name} {sub_name}", sub, sub_summary, depth + 1)
    return out


def render() -> str:
    sys.path.insert(0, str(REPO))
    from neurondesk.cli.main import build_parser

    parser = build_parser()
    lines = ["# Command line reference", "",
             "Generated from the parser by `scripts/make_cli_docs.py`; do not edit by hand. The pages",
             "linked from the README explain what the commands are for.", ""]
    for name, sub, summary in _commands(parser):
        lines += command_section(name, sub, summary)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    text = render()
    if ap.parse_args().check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python scripts/make_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
