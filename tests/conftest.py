"""Shared test helpers: real runs of the bundled workloads under `neurondesk run --headless`."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "workloads" / "train.py"
# Every fixture a test reads lives inside the repository, so a plain clone tests alone. The Neuron
# tool outputs (no Trainium here) are copies of the documented-format fixtures, kept verbatim.
DATA = REPO / "tests" / "data"
FIXTURES = DATA / "neuron"

SAVE_EVERY = 4  # see neurondesk_run
# The bound on one real run (a neurondesk run of a workload, a torchrun job): it is there to end a
# hang, never to time a run. `make test` with both CPUs busy (load 5-6 on 2 cores) made XLA runs
# three to four times slower and three of them passed 300 s; at 900 s a busy machine slows a run
# but does not fail it. Speed is measured in benchmarks/, never here.
REAL_RUN_TIMEOUT_S = 900
# The bundled workload's smallest model (one layer of width 32): for the XLA runs whose assertions
# are about graphs, shapes and ranks, not the model (each compile is cheaper; their number is the same).
TINY_MODEL = ["--num-layers", "1", "--d-model", "32", "--nhead", "2", "--dim-feedforward", "64", "--vocab", "100"]
HAS_XLA = importlib.util.find_spec("torch_xla") is not None
needs_xla = pytest.mark.skipif(not HAS_XLA, reason="torch-xla is not installed in this interpreter; `make test` installs it")

# The lanes (scripts/sort_tests.py files the modules; pyproject.toml registers a marker for each): a test
# is marked with its folder's lane. `make test-fast` runs the FAST_LANES, where no training process may start.
LANES = ("unit", "views", "contracts", "system", "runs")
FAST_LANES = ("unit", "views", "contracts")
# Test modules import helpers from here (tests/ is on sys.path as this conftest's folder) and, in a few
# places, from each other across lanes (`from test_notify_webhook import Hook`): every lane is on the path.
for _lane in LANES:
    if str(REPO / "tests" / _lane) not in sys.path:
        sys.path.append(str(REPO / "tests" / _lane))
# The scripts a training process runs: the bundled workloads and the tests' own.
TRAINING_SCRIPTS = (REPO / "workloads", DATA / "workloads", REPO / "tests" / "checkpoint_scripts")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    run_dir: Path

    @property
    def summary(self) -> dict:
        return json.loads((self.run_dir / "summary.json").read_text())

    @property
    def events(self) -> list[dict]:
        """The journal's events, a coalesced `steps` batch as the `step` events it stands for."""
        from step_messages import expand_steps

        lines = (self.run_dir / "events.jsonl").read_text().splitlines()
        return expand_steps([json.loads(line) for line in lines if line])


def wait_until(predicate, timeout: float, what: str, every: float = 0.1):
    """Poll ``predicate`` until it returns something truthy (returned); fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)
    return value


XLA_TEST_FLAGS = "--xla_backend_optimization_level=0"


def base_env(home: Path) -> dict[str, str]:
    """The environment of a CLI a test runs: nothing of the user's own (HOME, the XDG folders: no
    ~/.config/neurondesk/prices.json, no cached "not on EC2"), no Neuron/XLA debug switches."""
    env = dict(os.environ)
    env["NEURONDESK_HOME"] = str(home)
    for var, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"),
                     ("XDG_DATA_HOME", "data")):
        folder = home / "user" / sub
        folder.mkdir(parents=True, exist_ok=True)
        env[var] = str(folder)
    env["PJRT_DEVICE"] = "CPU"
    # XLA's CPU backend without LLVM's optimizations: every compile is still real (captured, lowered,
    # code generated, timed), at a third of the wall; the tests' tiny graphs run as fast either way
    env["XLA_FLAGS"] = XLA_TEST_FLAGS
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env.pop("PT_XLA_DEBUG", None)
    env.pop("PT_XLA_DEBUG_LEVEL", None)
    env.pop("TORCH_LOGS", None)
    # no TorchNeuron NEFF cache for runs that are not TorchNeuron's: the disk forecast watches the
    # default /tmp/neff_cache once it exists, and another test may have left one (torch213.py's
    # torchneuron_env gives TorchNeuron runs a cache folder of their own)
    env["TORCH_NEURONX_NEFF_DISABLE_CACHE"] = "1"
    return env


def neurondesk_run(tmp: Path, workload_args: list[str], nd_args: list[str] = (), timeout: float = REAL_RUN_TIMEOUT_S,
                   env: dict | None = None, workload: Path = TRAIN) -> Run:
    run_dir = tmp / "run"
    if workload == TRAIN and "--save-every" not in workload_args:
        # Every real run of the bundled workload checkpoints as scripts do (torch.save of the whole
        # model, the optimizer and an EMA deepcopy, read back): neurondesk must never break that.
        workload_args = [*workload_args, "--save-every", str(SAVE_EVERY)]
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.2xlarge",
           "--run-dir", str(run_dir), *nd_args, "--", sys.executable, str(workload), *workload_args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or base_env(tmp), cwd=REPO)
    return Run(p.returncode, p.stdout, p.stderr, run_dir)


def lane_of(path: Path) -> str | None:
    """The lane of a test module: its folder under tests/ (None for a module outside the lanes)."""
    path = path.resolve()
    parts = path.relative_to(REPO / "tests").parts if path.is_relative_to(REPO / "tests") else ()
    return parts[0] if len(parts) > 1 and parts[0] in LANES else None


# The order `make test`'s two workers take whole files in: the lanes of real processes first, so the long
# files start early and the short ones fill in at the end (a module not yet filed runs after those).
RUN_ORDER = ("runs", "system", None, "contracts", "views", "unit")


def pytest_collection_modifyitems(items):
    for item in items:
        if lane := lane_of(item.path):
            item.add_marker(lane)
    items.sort(key=lambda item: RUN_ORDER.index(lane_of(item.path)))  # stable: a file's tests stay in order


def training_process(argv: str | bytes | os.PathLike | Sequence) -> str | None:
    """What makes ``argv`` a training process (a `neurondesk run`, a torchrun launch, a python running a
    workload script), or None. The fast lanes' guard asks this of every process a test starts."""
    if isinstance(argv, str | bytes):  # a command line (shell=True)
        argv = shlex.split(os.fsdecode(argv))
    words = [os.fsdecode(a) for a in ([argv] if isinstance(argv, os.PathLike) else argv)]
    names = [Path(w).name for w in words]
    if "torchrun" in names or "torch.distributed.run" in words:
        return "a torchrun launch"
    cli = next((i for i, w in enumerate(words) if w == "neurondesk.cli" or names[i] == "neurondesk"), None)
    if cli is not None and next((w for w in words[cli + 1:] if not w.startswith("-")), None) == "run":
        return "`neurondesk run`"
    for word in words:
        if word.endswith(".py") and any(Path(word).resolve().is_relative_to(d) for d in TRAINING_SCRIPTS):
            return f"the training script {word}"
    return None


@pytest.fixture(autouse=True)
def _fast_lane_guard(request, monkeypatch):
    """A test in a fast lane (unit, views, contracts) that starts a training process fails, naming it: its
    module belongs in tests/runs/ (scripts/sort_tests.py), or the test reads a recorded journal instead.
    Every process the test's own interpreter starts goes through Popen._execute_child, threads included."""
    if lane_of(request.node.path) not in FAST_LANES:
        yield
        return
    started: list[str] = []
    execute_child = subprocess.Popen._execute_child

    def guarded(self, args, *rest, **kwargs):
        if what := training_process(args):
            started.append(what)
            pytest.fail(f"{what} started in the fast lane ({lane_of(request.node.path)}): real runs belong in "
                        f"tests/runs/ (scripts/sort_tests.py)", pytrace=False)
        return execute_child(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", guarded)
    yield
    assert not started, f"training processes started in the fast lane: {started}"


@pytest.fixture(autouse=True)
def _user_folders(tmp_path_factory, monkeypatch):
    """Every test, in-process CLI calls included, sees temporary user folders, never the user's."""
    root = tmp_path_factory.mktemp("user")
    for var, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache"),
                     ("XDG_DATA_HOME", "data")):
        (root / sub).mkdir()
        monkeypatch.setenv(var, str(root / sub))


# The figures the console snapshots (tests/__snapshots__) were taken with. A snapshot pins the layout; a
# figure added to core's table (core/figures/run_figures.py FIGURES) is shown in the console's panel where
# tests/views/test_figures_consistency.py checks it, and the snapshots stay as they are until they are retaken.
SNAPSHOT_FIGURES = ("steps_per_hour", "ttfi_s", "ttfi_cache")


@pytest.fixture(autouse=True)
def _snapshot_figures(request, monkeypatch):
    """In a snapshot test (it asks for snap_compare): the throughput panel lists SNAPSHOT_FIGURES only."""
    if "snap_compare" not in request.fixturenames:
        return
    from neurondesk.core.figures.run_figures import FIGURES
    from neurondesk.views.console import throughput

    monkeypatch.setattr(throughput, "FIGURES", tuple(f for f in FIGURES if f.name in SNAPSHOT_FIGURES))


def workload_timing(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("workload-timing:"):
            return json.loads(line.split(":", 1)[1])
    raise AssertionError("the workload printed no workload-timing line")
