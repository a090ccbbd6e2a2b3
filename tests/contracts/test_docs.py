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
    assert len(readme.encode()) <= 10 * 1024, "a front page: the reference belongs in docs/"
    for page in ("docs/design.md", "docs/checked-where.md"):  # where to look next
        assert f"]({page})" in readme, f"the README does not link {page}"
    assert "| claim | checked on |" not in readme, "the checked-where table lives in docs/checked-where.md"


def test_ci_runs_the_pinned_lane_then_the_newest_release_lane() -> None:
    commands = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
                if line.strip().startswith("make ")]
    assert commands == ["make test", "make test-latest"]
    makefile = (REPO / "Makefile").read_text()
    assert '-m "not latest_only"' in makefile  # trl and peft are only in .venv-latest
    assert '$(LATEST)/bin/python -m pytest -q -n 2 --dist loadfile -m "latest or latest_only"' in makefile


WALK = "## One figure, from the probe to the console and to summary.json"
CODE_PATH = re.compile(r"`([\w/.]+\.py)`")
NAME = re.compile(r"`([A-Z]\w+\.\w+|[a-z_]\w*)(?:\(\w*\))?`")


def test_the_design_is_in_the_repository_and_names_what_the_code_has() -> None:
    """docs/design.md is the one design page: nothing cites another, and every file it names exists, and
    every function, class and field its walk of one figure names is in the code (a rename fails here until
    the page follows)."""
    design = (DOCS / "design.md").read_text()
    cited = "DESIGN" + ".md"
    citing = [str(p.relative_to(REPO)) for root in ("neurondesk", "tests", "docs") for p in (REPO / root).rglob("*")
              if p.is_file() and p.suffix in (".py", ".md", ".toml", ".json") and "data" not in p.parts
              and cited in p.read_text(errors="replace")]
    citing += [name for name in ("Makefile", "pyproject.toml") if cited in (REPO / name).read_text()]
    assert not citing, f"these cite {cited}, which is not in the repository: {citing}"
    probe = REPO / "neurondesk" / "probe" / "bootstrap" / "_neurondesk_probe"
    roots = [REPO, REPO / "neurondesk", REPO / "neurondesk" / "probe", probe, probe / "backends"]
    files = {p.name for p in (REPO / "neurondesk").rglob("*.py")}  # a bare name: in its section's folder
    missing = [path for path in CODE_PATH.findall(design)
               if not (any((r / path).is_file() for r in roots) if "/" in path else path in files)]
    assert not missing, f"design.md names files that are not there: {missing}"
    walk = design.split(WALK, 1)[1].split("\n## ", 1)[0]
    names = {n for n in NAME.findall(walk) if "_" in n or "." in n or n[0].isupper()} - {"summary.json"}
    assert len(names) > 15  # the walk was read
    code = "\n".join(p.read_text() for p in (REPO / "neurondesk").rglob("*.py"))
    unknown = sorted(n for n in names if not n.endswith((".py", ".json", ".md"))
                     and not all(re.search(rf"\b{re.escape(part)}\b", code) for part in n.split(".")))
    assert not unknown, f"design.md's walk names what the code does not have: {unknown}"
