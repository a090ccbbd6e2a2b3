"""torch 2.13, the torch TorchNeuron runs on (issue 44): the TorchNeuron tests run their workloads
under it, with the TorchNeuron double (tests/torchneuron_double/) on the workload's PYTHONPATH.

The interpreter: NEURONDESK_TORCH213_PYTHON when set, else the repository's .venv-torch213 (`make
test` builds it first: `make venv-torch213`). Without either a test fails saying so: a missing
interpreter is never a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL_RUN_TIMEOUT_S, REPO, Run, base_env

DOUBLE = REPO / "tests" / "torchneuron_double"
SCRIPTS = REPO / "tests" / "data" / "torchneuron"


def torch213_python() -> str:
    given = os.environ.get("NEURONDESK_TORCH213_PYTHON")
    path = Path(given) if given else REPO / ".venv-torch213" / "bin" / "python"
    if not os.access(path, os.X_OK):
        pytest.fail(f"no torch 2.13 interpreter at {path}: run `make venv-torch213` (or set "
                    "NEURONDESK_TORCH213_PYTHON to a python with torch==2.13.0)", pytrace=False)
    return str(path)


def torchneuron_env(home: Path, **extra: str) -> dict[str, str]:
    """base_env with the double importable as torch_neuronx, and a NEFF cache of the test's own."""
    env = base_env(home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(DOUBLE), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", str(home / "neff-cache"))
    env.pop("TORCH_NEURONX_NEFF_DISABLE_CACHE", None)
    for var in ("TORCH_NEURONX_LOG_LEVEL", "TORCH_NEURONX_LOG_FILE", "TORCH_NEURONX_METRICS_ENABLED"):
        env.pop(var, None)
    env.update(extra)
    return env


def run_torchneuron(run_dir: Path, script: Path, args: list[str], env: dict[str, str],
                    nd_args: list[str] = ()) -> Run:
    """`neurondesk run --headless` of ``script`` under torch 2.13."""
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn2.48xlarge",
           "--price-per-hour", "40", "--run-dir", str(run_dir), *nd_args, "--", torch213_python(), str(script), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    return Run(p.returncode, p.stdout, p.stderr, run_dir)


# torch 2.13's CPU build itself aborts at interpreter exit now and then under load ("terminate called without an
# active exception", SIGABRT), in a process with no neurondesk in it: 3 of 25 plain runs of eager_shapes.py here
# beside a CI run, 0 of 80 on a quiet machine (2026-12-08). The reference run is the script's own output: taken
# again when torch died so, never when the script itself failed.
TORCH_EXIT_ABORT = b"terminate called without an active exception"


def run_alone(script: Path, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The same script with no neurondesk: its own bytes."""
    for _ in range(3):
        p = subprocess.run([torch213_python(), str(script), *args], capture_output=True, timeout=REAL_RUN_TIMEOUT_S,
                           env=env, cwd=cwd)
        if not (p.returncode == -6 and TORCH_EXIT_ABORT in p.stderr):
            break
    return p


def compare_runs(a: Path, b: Path, fmt: str, home: Path) -> str:
    """`neurondesk compare A B --format FMT`'s output (it must exit 0)."""
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "compare", str(a), str(b), "--format", fmt],
                       capture_output=True, text=True, timeout=120, env=base_env(home), cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout
