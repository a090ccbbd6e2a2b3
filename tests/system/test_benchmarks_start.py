"""Every benchmark script starts: its imports are today's code's (`--help` loads the module whole). Two had
gone stale with core's move into wings (console_cost.py and ranks_stream.py imported
`neurondesk.core.device_events`), and a benchmark nobody can rerun is no evidence."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

SCRIPTS = sorted(p for p in (REPO / "benchmarks").glob("*.py") if p.name != "bench_machine.py")


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_the_benchmark_starts(script):
    p = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=180,
                       cwd=REPO)
    assert p.returncode == 0 and "usage" in p.stdout.lower(), p.stderr[-2000:]
