"""The code keeps the shape the design asks for: no class over about 250 lines (a longer one is
several things), no module over 450 lines, no folder with more than 20 modules side by side (issue
43: a folder that big wants wings that say what they hold), and no import loop inside core (a pure part whose modules can be read in order).
Static: the source is parsed, nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "neurondesk"
MAX_CLASS_LINES = 250
MAX_MODULE_LINES = 450
MAX_MODULES_A_FOLDER = 20  # __init__.py counted


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_class_is_over_about_250_lines() -> None:
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} "
                            f"({node.end_lineno - node.lineno + 1} lines)")
    assert not long, "classes to split: " + "; ".join(long)


def long_modules(paths: list[Path]) -> list[str]:
    return [f"{p.name} ({n} lines)" for p in paths if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]


def crowded_folders(paths: list[Path]) -> list[str]:
    counts: dict[Path, int] = {}
    for p in paths:
        counts[p.parent] = counts.get(p.parent, 0) + 1
    return [f"{folder.name}/ ({n} modules)" for folder, n in sorted(counts.items()) if n > MAX_MODULES_A_FOLDER]


def test_no_module_is_over_450_lines_and_no_folder_over_20_modules() -> None:
    paths = _sources()
    assert not long_modules(paths), "modules to split: " + "; ".join(long_modules(paths))
    assert not crowded_folders(paths), "folders to give wings: " + "; ".join(crowded_folders(paths))


def test_the_size_checks_catch_a_long_module_and_a_crowded_folder(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "small.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert long_modules(sorted(tmp_path.glob("*.py"))) == [f"big.py ({MAX_MODULE_LINES + 1} lines)"]
    for i in range(MAX_MODULES_A_FOLDER - 2):
        (tmp_path / f"m{i}.py").write_text("")
    assert crowded_folders(sorted(tmp_path.glob("*.py"))) == []
    (tmp_path / "one_more.py").write_text("")
    assert crowded_folders(sorted(tmp_path.glob("*.py"))) == [f"{tmp_path.name}/ ({MAX_MODULES_A_FOLDER + 1} modules)"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_imports() -> dict[str, set[str]]:
    """core module -> the core modules it imports (at any level: function-level and TYPE_CHECKING too)."""
    paths = [p for p in _sources() if p.is_relative_to(PACKAGE / "core")]
    names = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {n for n in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if n in names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in names}
        graph[_module_name(path)] = deps - {_module_name(path)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_loop_finder_finds_a_loop() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_loop_inside_core() -> None:
    graph = core_imports()
    assert "neurondesk.core.reduce.state" in graph and graph["neurondesk.core.summary.build"]
    assert cycles(graph) == []
