"""One way to read a run (issue 51 item 1): outside neurondesk/core nothing reads a reducer (``state.parts``):
the exporter, the sinks, the reports, the recorder, the sources and the cli read core/view/read_views.py's
frozen readings. Inside core, the lower wings (node, events) neither import nor read a reducer: they take
typed values (hang's Progress, the Flight Recorder's FlightView).

import-linter cannot see an attribute read, so this is an AST walk over the package. Each rule is shown
failing on a planted read in a copy of the package in tmp_path, as tests/contracts/test_import_contracts.py does
for the import contracts."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from neurondesk.core.reduce.state import Parts

PACKAGE = REPO / "neurondesk"
REDUCERS = frozenset(Parts._fields)  # state.parts.<one of these> is a reducer
LOWER_WINGS = ("events", "node")


def _dotted(node: ast.AST) -> str:
    """``self.state`` for an Attribute chain of names, '' for anything else (a call, a subscript)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _reads_parts(tree: ast.AST) -> list[int]:
    """Lines that read a state's reducer parts: ``<x>.parts.<reducer>`` (whatever x is), or ``.parts`` of a
    name that is a state (``state``, ``self.state``, ``source.state``). A step bar's or a path's ``.parts`` is
    neither."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in REDUCERS and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "parts":
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "parts" and _dotted(node.value).split(".")[-1] in (
                "state", "st", "run_state"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and _dotted(node.func) == "getattr" and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value == "parts":
            lines.append(node.lineno)
    return sorted(set(lines))


def _touches_reducers(tree: ast.AST) -> list[int]:
    """Lines of a lower wing that import a reducer module, name RunState, read any ``.parts``, or define a
    reducer (a class with ``handlers()``, the event table RunState dispatches by: it belongs in core/reduce)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neurondesk.core.reduce"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Import) and any(a.name.startswith("neurondesk.core.reduce") for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "parts":
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in ("RunState", "Parts"):
            lines.append(node.lineno)
        elif isinstance(node, ast.ClassDef) and any(isinstance(f, ast.FunctionDef) and f.name == "handlers"
                                                    for f in node.body):
            lines.append(node.lineno)
    return sorted(set(lines))


def violations(package: Path) -> list[str]:
    """"path:line what" for every read the rules forbid, in the package at ``package``."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        tree = ast.parse(path.read_text(), filename=str(path))
        if rel.parts[0] != "core":
            out += [f"{rel}:{n} reads a state's reducer parts outside core" for n in _reads_parts(tree)]
        elif rel.parts[1] in LOWER_WINGS:
            out += [f"{rel}:{n} core/{rel.parts[1]} touches a reducer" for n in _touches_reducers(tree)]
    return out


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "neurondesk"
    shutil.copytree(PACKAGE, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "bootstrap"))
    return dest


def test_nothing_outside_core_reads_reducer_parts_and_no_lower_wing_touches_a_reducer():
    assert violations(PACKAGE) == []


@pytest.mark.slow  # a planted copy of the tree: make test runs it, make test-fast does not
def test_a_planted_parts_read_outside_core_is_found(tmp_path):
    package = _copy(tmp_path)
    assert violations(package) == []
    (package / "exporter" / "planted.py").write_text(
        "def samples(state):\n    return state.parts.steps.total_samples\n")
    (package / "cli" / "planted.py").write_text(
        "def job(runs):\n    return runs[0].parts.job.identity()\n")
    (package / "sinks" / "planted.py").write_text(
        "def first(self):\n    return next(iter(self.state.parts))\n")
    assert violations(package) == [
        "cli/planted.py:2 reads a state's reducer parts outside core",
        "exporter/planted.py:2 reads a state's reducer parts outside core",
        "sinks/planted.py:2 reads a state's reducer parts outside core",
    ]


def test_a_step_bar_or_path_parts_is_not_a_reducer_read(tmp_path):
    package = _copy(tmp_path)
    (package / "views" / "planted.py").write_text(
        "from pathlib import Path\n\ndef f(bar, p: Path):\n    return bar.parts, p.parts[0]\n")
    assert violations(package) == []


@pytest.mark.slow  # a planted copy of the tree: make test runs it, make test-fast does not
def test_a_planted_reducer_read_in_core_node_or_events_is_found(tmp_path):
    package = _copy(tmp_path)
    (package / "core" / "node" / "planted.py").write_text(
        "def idle(state, now):\n    return now - state.parts.steps.last_step_end\n")
    (package / "core" / "events" / "planted.py").write_text(
        "from neurondesk.core.reduce.steps import StepReducer\n")
    (package / "core" / "node" / "planted_reducer.py").write_text(
        "class FanReducer:\n    def handlers(self):\n        return {}\n")
    assert violations(package) == [
        "core/events/planted.py:1 core/events touches a reducer",
        "core/node/planted.py:2 core/node touches a reducer",
        "core/node/planted_reducer.py:1 core/node touches a reducer",
    ]
