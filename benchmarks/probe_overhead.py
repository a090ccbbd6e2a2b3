"""Probe overhead: the demo workload with and without neurondesk watching it.

Both arms report the workload's own synced steady step time (its `workload-timing` line), so
the same clock measures both. Runs are interleaved (A B B A ...) to spread machine noise over
both arms. The result is the ratio of the median steady step times, with-probe / without.

    .venv/bin/python benchmarks/probe_overhead.py [--runs 5] [--steps 300]

Writes benchmarks/results/probe_overhead.json and prints a one-line verdict (goal <= 1.01).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_machine import machine

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "workloads" / "train.py"
RESULTS = REPO / "benchmarks" / "results"


def timing(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("workload-timing:"):
            return json.loads(line.split(":", 1)[1])
    raise RuntimeError("no workload-timing line:\n" + stdout[-2000:])


def one(with_probe: bool, steps: int, home: str) -> float:
    workload = [sys.executable, str(TRAIN), "--preset", "demo", "--steps", str(steps), "--log-every", "50"]
    env = dict(os.environ, PJRT_DEVICE="CPU", NEURONDESK_HOME=home, AWS_EC2_METADATA_DISABLED="true")
    if with_probe:
        cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.2xlarge",
               "--", *workload]
    else:
        cmd = workload
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=True)
    return timing(p.stdout)["steady_step_time_s"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    without: list[float] = []
    with_probe: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        for i in range(args.runs):
            order = (False, True) if i % 2 == 0 else (True, False)
            for arm in order:
                t = one(arm, args.steps, home)
                (with_probe if arm else without).append(t)
                print(f"run {i + 1}/{args.runs} {'with probe   ' if arm else 'without probe'} "
                      f"steady step {t * 1000:.2f} ms", flush=True)
    ratio = statistics.median(with_probe) / statistics.median(without)
    result = {
        "benchmark": "probe_overhead",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "command": f"python benchmarks/probe_overhead.py --runs {args.runs} --steps {args.steps}",
        "workload": f"workloads/train.py --preset demo --steps {args.steps} (XLA on CPU)",
        "without_probe_steady_step_s": without,
        "with_probe_steady_step_s": with_probe,
        "median_without_s": statistics.median(without),
        "median_with_s": statistics.median(with_probe),
        "ratio_with_over_without": round(ratio, 4),
        "goal": "<= 1.01",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "probe_overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"ratio of median steady step time, with / without probe: {ratio:.4f} (goal <= 1.01)")


if __name__ == "__main__":
    main()
