"""A user who set torch_xla's debug switches is told once why graph hashes and torch_xla's compile
causes may be missing (neurondesk leaves those variables alone)."""

from __future__ import annotations

import json
import subprocess
import sys

from neurondesk.collectors.workload import user_debug_notice
from tests.conftest import REPO, base_env


def test_a_user_set_debug_file_is_said_once_in_a_real_run(tmp_path):
    env = base_env(tmp_path)
    env["PT_XLA_DEBUG_LEVEL"] = "2"
    env["PT_XLA_DEBUG_FILE"] = str(tmp_path / "mine.txt")
    run_dir = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                        "--run-dir", str(run_dir), "--", sys.executable, "-c", "print('hi')"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if x]
    said = [e["message"] for e in events if e["kind"] == "notice" and e.get("source") == "xla-debug"]
    assert len(said) == 1
    assert "PT_XLA_DEBUG_LEVEL, PT_XLA_DEBUG_FILE set by you" in said[0] and "mine.txt" in said[0]


def test_nothing_is_said_when_the_user_set_nothing():
    assert user_debug_notice({"PATH": "/usr/bin"}) is None
    assert "stderr" in user_debug_notice({"PT_XLA_DEBUG": "1"})
