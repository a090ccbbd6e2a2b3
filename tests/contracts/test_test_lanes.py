"""The suite's lanes (issue 51 item 6): every test module sits in its lane's folder (scripts/sort_tests.py), is
marked with that lane, and the fast lanes' guard (tests/conftest.py) fails a test there that starts a training
process, before the process starts, while the same test in tests/runs/ runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import FAST_LANES, LANES, REPO, training_process

sys.path.insert(0, str(REPO / "scripts"))
import sort_tests  # noqa: E402  (scripts/ is not a package)

PLANTED = '''
import subprocess, sys
from pathlib import Path

def test_starts_a_workload():
    script = Path(__file__).resolve().parents[2] / "workloads" / "train.py"
    subprocess.run([sys.executable, str(script)], check=True, timeout=60)
'''


def test_training_processes_are_told_from_other_processes():
    python = sys.executable
    assert training_process(["torchrun", "--nproc_per_node", "2", "train.py"]) == "a torchrun launch"
    assert training_process([python, "-m", "torch.distributed.run", "x.py"]) == "a torchrun launch"
    assert training_process([python, "-m", "neurondesk.cli", "run", "--headless", "--", "true"]) == "`neurondesk run`"
    assert training_process([python, str(REPO / "workloads" / "train.py"), "--steps", "3"]) is not None
    assert training_process(f"{python} {REPO / 'tests' / 'data' / 'workloads' / 'chatty.py'}") is not None
    for other in ([python, "-m", "neurondesk.cli", "summary", "run"], [python, "-c", "print(1)"],
                  ["promtool", "check", "metrics"], [python, "-m", "neurondesk.recorder"]):
        assert training_process(other) is None, other


@pytest.mark.slow  # a planted tree's own pytest: make test runs it, make test-fast does not
def test_the_guard_fails_a_fast_lane_test_that_starts_a_training_process_and_lets_a_runs_test_run_it(tmp_path):
    """A copy of tests/conftest.py over a planted tree: the same test in unit/ fails and its script never runs
    (it would leave a file), in runs/ it runs."""
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "runs").mkdir()
    (tmp_path / "workloads").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    ran = tmp_path / "ran"
    (tmp_path / "workloads" / "train.py").write_text(f"open({str(ran)!r}, 'a').write('ran\\n')\n")
    (tmp_path / "tests" / "unit" / "test_planted_unit.py").write_text(PLANTED)
    (tmp_path / "tests" / "runs" / "test_planted_runs.py").write_text(PLANTED)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # pytest alone: the conftest needs no plugin
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "tests"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    out = p.stdout
    assert p.returncode == 1, out
    assert "FAILED tests/unit/test_planted_unit.py::test_starts_a_workload" in out, out
    assert "the training script" in out and "tests/runs/" in out, out
    assert "PASSED tests/runs/test_planted_runs.py::test_starts_a_workload" in out, out
    assert ran.read_text() == "ran\n"  # once: from runs/ only


def test_every_module_is_in_its_lanes_folder():
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "sort_tests.py"), "--check"], capture_output=True,
                       text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert set(sort_tests.LANES) == set(LANES) and set(FAST_LANES) < set(LANES)
    assert set(sort_tests.TABLE.values()) <= set(LANES)


def test_a_new_module_is_guessed_into_a_lane_from_its_text(tmp_path):
    cases = {"from conftest import neurondesk_run\nrun = neurondesk_run(tmp, [])\n": "runs",
             "import subprocess\nsubprocess.run(['promtool'])\n": "system",
             "async def t():\n    async with app.run_test() as pilot: ...\n": "views",
             "from neurondesk.core.reduce.state import RunState\n": "unit"}
    for text, lane in cases.items():
        module = tmp_path / "test_new.py"
        module.write_text(text)
        assert sort_tests.lane_of(module) == (lane, False), text


def test_a_test_is_marked_with_its_lane(request):
    assert request.node.get_closest_marker("contracts") is not None
    assert request.node.get_closest_marker("runs") is None


@pytest.mark.parametrize("lane", LANES)
def test_each_lane_is_a_registered_marker(lane, pytestconfig):
    assert any(line.startswith(f"{lane}:") for line in pytestconfig.getini("markers")), lane


def test_no_module_finds_its_data_from_its_own_folder():
    """A module moves between lanes (scripts/sort_tests.py): it reaches tests/data, the helpers and the workloads
    through conftest's REPO, DATA and FIXTURES, never `Path(__file__)`, whose folder changes with the move."""
    modules = [p for p in sorted((REPO / "tests").rglob("test_*.py")) if p.name != "test_test_lanes.py"]  # it plants one
    found = [f"{path.relative_to(REPO)}:{n}" for path in modules
             for n, line in enumerate(path.read_text().splitlines(), 1) if "Path(__file__)" in line]
    assert not found, f"use conftest's REPO / DATA / FIXTURES instead: {found}"
