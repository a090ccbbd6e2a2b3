"""The documentation has the product's shape: every command and option is documented, the
generated pages are current, and every relative link resolves."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from neurondesk.cli.main import build_parser

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
HAND_WRITTEN = [p for p in PAGES if p.name != "cli.md"]  # cli.md is generated from the parser
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")


def commands_and_options() -> list[tuple[str, list[str]]]:
    """(command, its documented option strings), every subcommand level included."""
    out: list[tuple[str, list[str]]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        options = [s for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
                   and not isinstance(a, argparse._HelpAction) for s in a.option_strings if s.startswith("--")]
        if name:
            out.append((name, options))
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub_name, sub in a.choices.items():
                    walk(f"{name} {sub_name}".strip(), sub)
    walk("", build_parser())
    return out


def test_the_command_line_reference_is_generated_from_the_current_parser() -> None:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "make_cli_docs.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_every_command_and_option_is_explained_in_a_hand_written_page() -> None:
    text = "\n".join(p.read_text() for p in HAND_WRITTEN)
    found = commands_and_options()
    assert len(found) > 15  # the parser was walked
    missing_commands = [c for c, _ in found if f"neurondesk {c}" not in text]
    missing_options = [(c, o) for c, options in found for o in options if o not in text]
    assert not missing_commands, f"commands no page explains: {missing_commands}"
    assert not missing_options, f"options no page explains: {missing_options}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [target for target in LINK.findall(page.read_text())
              if "://" not in target and not target.startswith("mailto:")
              and not (page.parent / target).exists()]
    assert not broken, f"{page.name} links to what is not there: {broken}"


def test_the_readme_is_a_front_page_with_the_two_quick_start_commands() -> None:
    readme = (REPO / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```")[1]
    assert [line.split("#")[0].strip() for line in quick.strip().splitlines()] == ["make demo", "make test"]
    assert len(readme.encode()) < 24_000, "the reference belongs in docs/"
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
