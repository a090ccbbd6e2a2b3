"""What neurondesk adds to a step end to end: the most adversarial training, a loop of bare
``optimizer.step()`` calls, alone and under ``neurondesk run --headless``, in interleaved rounds of
the same invocation. The figure is the workload's own: it times its loop itself (after a warm-up)
and prints its steps/s; the probe, the recorder (decode, validate, journal, reduce) and the
headless printer all share this machine's cores with it, as they do in a real run.

    .venv/bin/python benchmarks/step_overhead.py [--steps 150000] [--rounds 3] [--baseline-tree DIR]

--own-tmpdir: every process gets TMPDIR=<a fresh empty folder>. The viewer looks for a fallback
journal folder in the temporary folder at each poll that brings nothing new (store/fallback.py,
fallback_roots lists it); a shared machine's /tmp with 572,000 entries (leaked by another
benchmark) made that 0.26 s a call, more than all the per-step work; this measures without it.

--baseline-tree: a third arm, under run with the neurondesk of another checkout (a worktree of an
earlier commit: `git worktree add --detach /tmp/nd-base REV`), on PYTHONPATH for the CLI, the
recorder and the probe it loads.

Writes benchmarks/results/step_overhead.json: steps/s per round and arm, their medians, and the
cost per step end to end, 1/rate(under run) - 1/rate(alone), in microseconds (goal <= 10).

On a shared, loaded machine the wall figure moves with everyone else's load (the machine's load
average is in the result). So each round also runs both arms with few steps (--short) and takes
the CPU time of the whole process tree (the workload, and under run the recorder, the viewer and
the output relay: getrusage of the reaped children): (cpu(steps) - cpu(short)) / (steps - short)
per arm, and their difference is the CPU neurondesk takes per step from the machine, start-up
costs cancelled, nearly blind to other load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_machine import machine

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
GOAL_US = 10.0

WORKLOAD = r"""
import json, sys, time
import torch
steps, warmup = int(sys.argv[1]), int(sys.argv[2])
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.0)
p.grad = torch.zeros(1)
step = opt.step
for _ in range(warmup):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
elapsed = time.perf_counter() - t0
print("step-overhead: " + json.dumps({"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}), flush=True)
"""


def rate_of(stdout: str) -> float:
    for line in stdout.splitlines():
        if "step-overhead: " in line:
            return json.loads(line.split("step-overhead: ", 1)[1])["steps_per_s"]
    raise RuntimeError("the workload printed no step-overhead line:\n" + stdout[-2000:])


def one(arm: str, script: Path, steps: int, warmup: int, home: str, tree: str,
        tmpdir: str | None) -> tuple[float, float]:
    """The workload's own steps/s, and the CPU seconds of the whole process tree."""
    workload = [sys.executable, str(script), str(steps), str(warmup)]
    env = dict(os.environ, NEURONDESK_HOME=home, AWS_EC2_METADATA_DISABLED="true", PYTHONPATH=tree)
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--", *workload] if arm != "alone" else workload
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rate_of(p.stdout), cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=150_000, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--short", type=int, default=10_000, help="timed steps of the runs that measure start-up CPU")
    ap.add_argument("--out", default=str(RESULTS / "step_overhead.json"))
    ap.add_argument("--baseline-tree", help="another checkout's neurondesk as a third arm (see above)")
    ap.add_argument("--own-tmpdir", action="store_true", help="TMPDIR: a fresh empty folder (see above)")
    args = ap.parse_args()
    arms = ["alone", "under_run"] + (["under_run_baseline"] if args.baseline_tree else [])
    trees = {"alone": str(REPO), "under_run": str(REPO), "under_run_baseline": args.baseline_tree}
    rates: dict[str, list[float]] = {a: [] for a in arms}
    cpu_slope: dict[str, list[float]] = {a: [] for a in arms}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="nd-so-") as home:
        script = Path(home) / "bare_steps.py"
        script.write_text(WORKLOAD)
        tmpdir = None
        if args.own_tmpdir:
            tmpdir = os.path.join(home, "tmp")
            os.mkdir(tmpdir)
        for i in range(args.rounds):
            for arm in (arms if i % 2 == 0 else arms[::-1]):
                rate, cpu = one(arm, script, args.steps, args.warmup, home, trees[arm], tmpdir)
                _, cpu_short = one(arm, script, args.short, args.warmup, home, trees[arm], tmpdir)
                rates[arm].append(rate)
                cpu_slope[arm].append((cpu - cpu_short) / (args.steps - args.short))
                print(f"round {i + 1}/{args.rounds} {arm:18} {rate:,.0f} steps/s, "
                      f"{cpu_slope[arm][-1] * 1e6:.1f} us CPU a step", flush=True)
    load_after = os.getloadavg()
    med = {a: statistics.median(rates[a]) for a in arms}
    cpu_med = {a: statistics.median(cpu_slope[a]) for a in arms}
    added = {a: round((1 / med[a] - 1 / med["alone"]) * 1e6, 2) for a in arms if a != "alone"}
    cpu_added = {a: round((cpu_med[a] - cpu_med["alone"]) * 1e6, 2) for a in arms if a != "alone"}
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    result = {
        "benchmark": "step_overhead",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": f".venv/bin/python benchmarks/step_overhead.py --steps {args.steps} --rounds {args.rounds}"
                   + (" --own-tmpdir" if args.own_tmpdir else "")
                   + (" --baseline-tree DIR" if args.baseline_tree else ""),
        "tmpdir": "a fresh empty folder" if args.own_tmpdir else f"{tempfile.gettempdir()} "
                  f"({len(os.listdir(tempfile.gettempdir())):,} entries)",
        "machine": machine(),
        "head": head,
        "workload": f"a loop of bare optimizer.step() on a one-element parameter (SGD, eager CPU torch), "
                    f"{args.warmup} warm-up steps then {args.steps} timed by the loop itself",
        "baseline_tree": args.baseline_tree and subprocess.run(
            ["git", "-C", args.baseline_tree, "log", "-1", "--format=%h %s"], capture_output=True, text=True
        ).stdout.strip()[:120],
        "steps_per_s": {a: [round(r) for r in rates[a]] for a in arms},
        "median_steps_per_s": {a: round(med[a]) for a in arms},
        "added_us_per_step": added,
        "goal_us_per_step": GOAL_US,
        "cpu_us_per_step": {a: [round(x * 1e6, 2) for x in cpu_slope[a]] for a in arms},
        "cpu_added_us_per_step": cpu_added,
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "note": "neurondesk run --headless: probe in the workload, recorder and printer in their own processes, all "
                "on this machine's cores; added = 1/median(arm) - 1/median(alone), wall, the loop's own timing; "
                "cpu_added = the whole tree's CPU per step (start-up cancelled by the --short runs) less the "
                "workload's alone",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
