"""A checkpoint save or load that fails in the user's code (issue 53 item 2): the uncaught traceback
the user reads under neurondesk is, line for line, the one they read without it (no frame of the
probe's checkpoint hooks), the exit code the same, and the failed call still recorded."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REAL_RUN_TIMEOUT_S, REPO, base_env, neurondesk_run

SCRIPT = REPO / "tests" / "checkpoint_scripts" / "save_fails.py"


def _traceback(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("Traceback (most recent call last):")
    return lines[start:]


@pytest.mark.parametrize("mode", ["save", "load", "inner"])
def test_a_failed_checkpoint_call_leaves_the_users_traceback_as_it_is_alone(tmp_path, mode):
    out_alone, out_nd = tmp_path / "alone", tmp_path / "nd"
    out_alone.mkdir(), out_nd.mkdir()
    env = base_env(tmp_path)
    alone = subprocess.run([sys.executable, str(SCRIPT), str(out_alone), mode], capture_output=True, text=True,
                           timeout=REAL_RUN_TIMEOUT_S, env=env)
    run = neurondesk_run(tmp_path, [str(out_nd), mode], workload=SCRIPT, env=env)
    assert alone.returncode == 1 and run.returncode == 1, run.stderr[-2000:]
    expected = [line.replace(str(out_alone), str(out_nd)) for line in _traceback(alone.stderr)]
    seen = _traceback((run.run_dir / "stderr.log").read_text())
    assert "_neurondesk_probe" not in "\n".join(seen)
    assert seen == expected
    ops = [e for e in run.events if e["kind"] == "checkpoint"]
    assert [(e["op"], e["ok"]) for e in ops] == [("load" if mode == "load" else "save", False)]
