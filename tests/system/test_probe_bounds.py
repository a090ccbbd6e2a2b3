"""What the probe keeps inside the workload stays bounded however long a loop runs without a step
boundary (issue 34 item 5). The memory itself is measured in benchmarks/probe_forward_memory.py
(1M forwards: results/probe_forward_memory.json); here, in a real process with the real probe
installed as the bootstrap does it, the shapes it holds after 5,000 forwards of an eager
inference loop (no optimizer, no backward: no step ever ends)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, base_env


def test_an_inference_loop_with_no_step_keeps_a_bounded_list_of_input_shapes(tmp_path):
    p = subprocess.run([sys.executable, str(REPO / "benchmarks" / "probe_forward_memory.py"), "--child", "probe",
                        "--forwards", "5000"], capture_output=True, text=True, timeout=300, env=base_env(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["steps"] == 0  # no step boundary at all: the case that grew
    assert out["kept_shapes"] == out["shapes_keep"] < 5000  # the bound (64), not one per forward
