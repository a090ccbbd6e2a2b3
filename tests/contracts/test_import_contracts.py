"""docs/design.md's arrows as import contracts ([tool.importlinter] in pyproject.toml, run by `make test`).

Each contract is shown able to fail: the project's own contract text, pointed at a tiny fake package
in tmp_path, is kept when the fake respects every arrow and broken, through the planted import,
when it does not. The probe's bootstrap folder is not a package (it goes on the workload's
PYTHONPATH as-is), so import-linter never sees it: its imports are checked here, statically and in
a fresh interpreter. Core is also imported in a fresh interpreter to see what it really pulls in.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
FAKE = "fakedesk"


def contracts_config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)  # a JSON string or list of strings is valid TOML


def fake_config_toml(config: dict) -> str:
    """The project's contracts, every `neurondesk` renamed to the fake package."""
    lines = ["[tool.importlinter]"]
    for k, v in config.items():
        if k != "contracts":
            lines.append(f"{k} = {_toml_value(v)}")
    for c in config["contracts"]:
        lines.append("\n[[tool.importlinter.contracts]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in c.items()]
    return re.sub(r"\bneurondesk\b", FAKE, "\n".join(lines) + "\n")


# A miniature neurondesk that keeps every arrow. Keys are paths under tmp_path/fakedesk.
CLEAN = {
    "__init__.py": "",
    "probe/__init__.py": "import json\nimport socket\n",
    "core/__init__.py": "",
    # core's wings, each reading only the ones below it (the layers contract)
    **{f"core/{w}/__init__.py": "" for w in ("events", "node", "reduce", "findings", "figures", "summary",
                                               "rules", "job", "view")},
    "core/events/run_events.py": "import dataclasses\nimport json\nfrom datetime import datetime\n",
    "core/node/prices.py": "from importlib import resources\n\nfrom fakedesk.core.events import run_events\n",
    "core/reduce/state.py": "from fakedesk.core.events import run_events\nfrom fakedesk.core.node import prices\n",
    "core/findings/crash.py": "from fakedesk.core.reduce import state\n",
    "core/figures/cost.py": "from fakedesk.core.findings import crash\nfrom fakedesk.core.reduce import state\n",
    "core/summary/build.py": "from fakedesk.core.figures import cost\n",
    "core/rules/checks.py": "from fakedesk.core.summary import build\n",
    "core/job/fleet.py": "from fakedesk.core.rules import checks\nfrom fakedesk.core.events import run_events\n",
    "core/view/run_view.py": "from fakedesk.core.job import fleet\nfrom fakedesk.core.figures import cost\n",
    "collectors/__init__.py": "",
    "collectors/workload.py": "import subprocess\n\nimport psutil\n\nfrom fakedesk.core import events\n",
    "store/__init__.py": "",
    "store/journal.py": "import os\nimport sqlite3\n\nfrom fakedesk.core import events\n",
    "recorder/__init__.py": "",
    "recorder/wiring.py": ("from fakedesk.collectors import workload\nfrom fakedesk.store import journal\n"
                           "from fakedesk.reports import summary_text\nfrom fakedesk.sinks import tb\n"
                           "from fakedesk.exporter import endpoint\n"),
    "exporter/__init__.py": "",
    "exporter/endpoint.py": "import threading\n\nimport prometheus_client\n\nfrom fakedesk.core import events\n",
    "reports/__init__.py": "",
    "reports/summary_text.py": "import json\n\nfrom fakedesk.core import events\n",
    "sources/__init__.py": "",
    "sources/follow.py": "from fakedesk.store import journal\nfrom fakedesk.reports import summary_text\n",
    "sources/launch.py": "import subprocess\n\nfrom fakedesk.recorder import wiring\n",
    "clients/__init__.py": "",
    "clients/imds.py": "import urllib.request\n\nfrom fakedesk.core import prices\n",
    "views/__init__.py": "",
    "views/headless.py": "from fakedesk.core import events\nfrom fakedesk.store import journal\n",
    "views/console.py": "import textual\nfrom rich.text import Text\n\nfrom fakedesk.core import prices\n",
    "lint/__init__.py": "import ast\nimport re\n",
    "sinks/__init__.py": "",
    "sinks/tb.py": "import threading\n\nimport tensorboard\n\nfrom fakedesk.core import events\n",
    "doctor/__init__.py": "import subprocess\n\nfrom fakedesk.collectors import workload\nfrom fakedesk import lint\n",
    # the command line: main on top of the families, args and errors below them (the cli contracts)
    "cli/__init__.py": "",
    "cli/__main__.py": "from fakedesk.cli.main import main\n",
    "cli/main.py": "from fakedesk.cli import checks, history, job, prices, reports, run, share, watch\n",
    "cli/run.py": ("from fakedesk.recorder import wiring\nfrom fakedesk.sources import launch\n"
                   "from fakedesk.clients import imds\nfrom fakedesk.cli import metrics, prices, share, sinks, watch\n"),
    "cli/watch.py": "from fakedesk.views import console, headless\nfrom fakedesk.sources import follow\n"
                    "from fakedesk.exporter import endpoint\n"
                    "from fakedesk.cli import args, errors, metrics\n",
    "cli/share.py": ("from fakedesk.cli import args, errors, sinks\nfrom fakedesk.cli.history import resolve_run\n"
                     "from fakedesk.cli.history import FORMATS\n"),
    "cli/sinks.py": "from fakedesk.cli import errors, history\n",
    "cli/history.py": "from fakedesk.store import journal\nfrom fakedesk.cli import args, errors\n",
    **{f"cli/{m}.py": "from fakedesk.cli import args, errors\n" for m in ("reports", "prices", "checks", "job", "metrics")},
    "cli/args.py": "import argparse\n",
    "cli/errors.py": "import sys\n",
}

# contract id -> [(file planted, its source, a line of the chain lint-imports must print)]
VIOLATIONS = {
    "probe": [("probe/leak.py", "from fakedesk.core import events\n", "fakedesk.probe.leak -> fakedesk.core.events")],
    "core": [("core/clock.py", "import time\n", "fakedesk.core.clock -> time"),
             ("core/ui.py", "import psutil\n", "fakedesk.core.ui -> psutil"),
             ("core/up.py", "from fakedesk.store import journal\n", "fakedesk.core.up -> fakedesk.store.journal")],
    "core-wings": [("core/reduce/ahead.py", "from fakedesk.core.figures import cost\n",
                    "fakedesk.core.reduce.ahead -> fakedesk.core.figures.cost"),
                   ("core/events/up.py", "from fakedesk.core.job import fleet\n",
                    "fakedesk.core.events.up -> fakedesk.core.job.fleet"),
                   ("core/figures/shown.py", "from fakedesk.core.view import run_view\n",
                    "fakedesk.core.figures.shown -> fakedesk.core.view.run_view")],
    "views": [("views/tap.py", "from fakedesk.collectors import workload\n",
               "fakedesk.views.tap -> fakedesk.collectors.workload"),
              ("views/attach.py", "from fakedesk.recorder import wiring\n",
               "fakedesk.views.attach -> fakedesk.recorder.wiring")],
    "store": [("store/ui.py", "import textual\n", "fakedesk.store.ui -> textual"),
              ("store/own.py", "from fakedesk.recorder import wiring\n", "fakedesk.store.own -> fakedesk.recorder.wiring")],
    "recorder": [("recorder/show.py", "from fakedesk.views import headless\n",
                  "fakedesk.recorder.show -> fakedesk.views.headless"),
                 ("recorder/tail.py", "from fakedesk.sources import follow\n",
                  "fakedesk.recorder.tail -> fakedesk.sources.follow")],
    "sources": [("sources/ui.py", "from fakedesk.views import console\n", "fakedesk.sources.ui -> fakedesk.views.console")],
    "reports": [("reports/live.py", "from fakedesk.recorder import wiring\n",
                 "fakedesk.reports.live -> fakedesk.recorder.wiring"),
                ("reports/ui.py", "import textual\n", "fakedesk.reports.ui -> textual")],
    "clients": [("clients/ui.py", "from fakedesk.views import console\n", "fakedesk.clients.ui -> fakedesk.views.console")],
    "collectors": [("collectors/ui.py", "from fakedesk.views import headless\n",
                    "fakedesk.collectors.ui -> fakedesk.views.headless")],
    "lint": [("lint/run.py", "import subprocess\n", "fakedesk.lint.run -> subprocess"),
             ("lint/up.py", "from fakedesk.core import events\n", "fakedesk.lint.up -> fakedesk.core.events")],
    "exporter": [("exporter/own.py", "from fakedesk.recorder import wiring\n",
                  "fakedesk.exporter.own -> fakedesk.recorder.wiring"),
                 ("exporter/show.py", "from fakedesk.views import headless\n",
                  "fakedesk.exporter.show -> fakedesk.views.headless"),
                 ("exporter/ui.py", "import textual\n", "fakedesk.exporter.ui -> textual")],
    "sinks": [("sinks/own.py", "from fakedesk.recorder import wiring\n", "fakedesk.sinks.own -> fakedesk.recorder.wiring"),
              ("sinks/disk.py", "from fakedesk.store import journal\n", "fakedesk.sinks.disk -> fakedesk.store.journal"),
              ("sinks/ui.py", "import textual\n", "fakedesk.sinks.ui -> textual")],
    "doctor": [("doctor/ui.py", "import textual\n", "fakedesk.doctor.ui -> textual"),
               ("doctor/ask.py", "import torch\n", "fakedesk.doctor.ask -> torch")],
    # a family that reaches back up to main (for its parser), and the base that reaches up to a family
    "cli": [("cli/job.py", "from fakedesk.cli import errors\nfrom fakedesk.cli.main import REPORT_COMMANDS\n",
             "fakedesk.cli.job -> fakedesk.cli.main"),
            ("cli/errors.py", "from fakedesk.cli import history\n", "fakedesk.cli.errors -> fakedesk.cli.history")],
    # two families that import each other (the planted import is the one to remove: share has two to history)
    "cli-acyclic": [("cli/history.py", "from fakedesk.cli import args, errors, share\n", "- .history -> .share (1 import)")],
}


def lint_fake(root: Path, files: dict[str, str]) -> subprocess.CompletedProcess:
    for rel, text in files.items():
        path = root / FAKE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    config = root / "contracts.toml"
    config.write_text(fake_config_toml(contracts_config()))
    env = {"PYTHONPATH": str(root), "PATH": "", "COLUMNS": "250"}  # wide: contract names are not wrapped
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)], cwd=root,
                          capture_output=True, text=True, timeout=120, env=env)


def broken_sections(output: str, config: dict) -> dict[str, str]:
    """Contract id -> the text lint-imports printed under that contract's 'Broken contracts' heading."""
    tail = output.split("Broken contracts", 1)[1] if "Broken contracts" in output else ""
    heads = {}
    for c in config["contracts"]:
        name = re.sub(r"\bneurondesk\b", FAKE, c["name"])
        m = re.search(re.escape(name) + r"\n-+\n", tail)
        if m:
            heads[c["id"]] = m.start()
    starts = sorted(heads.values()) + [len(tail)]
    return {cid: tail[s:starts[starts.index(s) + 1]] for cid, s in heads.items()}


def test_every_contract_has_a_planted_violation() -> None:
    assert {c["id"] for c in contracts_config()["contracts"]} == set(VIOLATIONS)


def test_a_package_that_keeps_every_arrow_passes(tmp_path: Path) -> None:
    p = lint_fake(tmp_path, CLEAN)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"Contracts: {len(VIOLATIONS)} kept, 0 broken." in p.stdout


def test_each_contract_fails_on_its_planted_import(tmp_path: Path) -> None:
    planted = {path: text for plants in VIOLATIONS.values() for path, text, _ in plants}
    p = lint_fake(tmp_path, {**CLEAN, **planted})
    assert p.returncode == 1, p.stdout + p.stderr
    sections = broken_sections(p.stdout, contracts_config())
    assert set(sections) == set(VIOLATIONS), p.stdout
    for cid, plants in VIOLATIONS.items():
        for _, _, chain in plants:
            assert chain in sections[cid], f"{cid}: expected {chain!r} in\n{sections[cid]}"


# ------------------------------------------------------------------ what import-linter cannot see

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
# The workload's own packages, imported lazily by hooks that only run once the user imported them.
PROBE_MAY_IMPORT = {"__future__", "torch", "torch_xla", "_neurondesk_probe", "sitecustomize"}


def _has_code(path: Path) -> bool:
    """A package's __init__.py that holds only its docstring has nothing to import (frameworks/)."""
    body = ast.parse(path.read_text(), str(path)).body
    return not all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


@pytest.mark.parametrize("path", sorted(p for p in set(BOOTSTRAP.rglob("*.py")) - {BOOTSTRAP / "__init__.py"}
                                        if _has_code(p)),
                         ids=lambda p: str(p.relative_to(BOOTSTRAP)))
def test_probe_bootstrap_imports_only_the_stdlib_and_the_workloads_torch(path: Path) -> None:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):  # function-level imports too
        if isinstance(node, ast.Import):
            names += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(("." * node.level + (node.module or ""), node.lineno))
    assert names, "no imports found: is this the probe?"
    bad = [(n, line) for n, line in names  # ".x": a part of the probe's own package
           if not (n.startswith(".") and "_neurondesk_probe" in path.relative_to(BOOTSTRAP).parts[:-1])
           and n.split(".")[0] not in sys.stdlib_module_names | PROBE_MAY_IMPORT]
    assert not bad, f"{path.name} imports outside the stdlib and the workload's torch: {bad}"


def test_probe_loads_from_its_folder_with_the_stdlib_alone() -> None:
    # -I -S: no site-packages, no PYTHONPATH, no user site: a bare interpreter, as the workload's
    # may be. Loaded the way the workload loads it: the bootstrap folder on sys.path.
    code = (f"import sys; sys.path.insert(0, {str(BOOTSTRAP)!r}); import _neurondesk_probe, sitecustomize; "
            "import json; print(json.dumps(sorted(sys.modules)))")
    p = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    loaded = json.loads(p.stdout)
    assert [m for m in loaded if m.startswith("neurondesk")] == []
    assert not {"torch", "psutil", "textual", "pynvml"} & set(loaded)


def test_core_imported_alone_pulls_in_no_console_library_and_no_io_module() -> None:
    code = ("import importlib, json, pkgutil, sys; import neurondesk.core as c\n"
            "for m in pkgutil.walk_packages(c.__path__, 'neurondesk.core.'): importlib.import_module(m.name)\n"
            "print(json.dumps(sorted(sys.modules)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0, p.stderr
    loaded = set(json.loads(p.stdout))
    assert "neurondesk.core.reduce.state" in loaded
    forbidden = {"textual", "rich", "psutil", "pynvml", "platformdirs", "torch", "sqlite3", "subprocess", "socket"}
    assert not forbidden & loaded
    assert sorted(m for m in loaded if m.startswith("neurondesk.") and not m.startswith("neurondesk.core")) == []
