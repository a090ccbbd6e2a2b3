"""Many probes into one recorder (issue 52 item 5): a trn2.48xlarge's 64 ranks, simulated.

benchmarks/many_probes_workload.py runs N rank processes under `neurondesk run --detach`, each with
the real probe (sitecustomize, transport, batching, the socket): steps at a real job's rate for a
while, then a burst (every rank ending steps as fast as it can at once). Two arms in one invocation:
1 rank (the baseline) and N ranks (default 64). For each: the steps each rank ended (its own count)
against the step events journaled for it and the steps its probe said it dropped (none lost: every
step is journaled or counted as dropped, and how many were dropped), the recorder's CPU (share of one
core over the run, its busiest second) and RSS (psutil, once a second), and how long after the
workload ended the recorder had its summary written. The console's refresh at 64 ranks is
benchmarks/ranks_stream.py --ranks 64 (the real app in a pseudo-terminal).

    .venv/bin/python benchmarks/many_probes.py                     # 64 ranks, 20 s + a burst of 2,000 steps each
    .venv/bin/python benchmarks/many_probes.py --ranks 64 --seconds 10 --burst 500

Results: benchmarks/results/many_probes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import psutil  # noqa: E402
from watch_cost import Sampler, alive, bench_env, read_info  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "benchmarks" / "many_probes_workload.py"
RESULTS = REPO / "benchmarks" / "results" / "many_probes.json"
sys.path.insert(0, str(REPO))


def journal_steps(run_dir: Path) -> tuple[Counter, Counter, dict[int, int]]:
    """(steps journaled per pid, steps the probe said it dropped per pid, rank of each pid)."""
    from neurondesk.store.journal import iter_journal

    steps: Counter = Counter()
    dropped: Counter = Counter()
    rank_of: dict[int, int] = {}
    for e in iter_journal(run_dir / "events.jsonl", []):
        if e.kind == "step":
            steps[e.pid] += 1
        elif e.kind == "steps":
            steps[e.pid] += len(e.ts)
        elif e.kind == "probe_dropped":
            dropped[e.pid] = max(dropped[e.pid], e.dropped_steps)
        elif e.kind == "process_attached" and e.rank is not None:
            rank_of[e.pid] = e.rank
    return steps, dropped, rank_of


def arm(ranks: int, seconds: float, step_s: float, burst: int, home: str) -> dict:
    env = bench_env(home)
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--detach", "--price-per-hour", "1", "--",
           sys.executable, str(WORKLOAD), "--ranks", str(ranks), "--seconds", f"{seconds:g}", "--step-s",
           f"{step_s:g}", "--burst", str(burst)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=True)
    run_dir = Path(p.stdout.strip().splitlines()[-1])
    info = read_info(run_dir)
    sampler = Sampler()
    sampler.add("recorder", info["pid"])
    workload = psutil.Process(info["workload_pid"])
    t0 = time.monotonic()
    while alive(workload):
        sampler.sample()
        time.sleep(1.0 - (time.monotonic() - t0) % 1.0)
    t_end = time.monotonic()
    rec = sampler.procs["recorder"]
    while alive(rec) and time.monotonic() - t_end < 300:
        sampler.sample()
        time.sleep(0.2)
    drained_s = time.monotonic() - t_end
    said = {}  # 64 writers to one pipe: lines may run together, the records never
    for text in re.findall(r"many-probes: (\{[^}]*\})", (run_dir / "stdout.log").read_text()):
        d = json.loads(text)
        said[d["rank"]] = d
    steps, dropped, rank_of = journal_steps(run_dir)
    per_rank = []
    for pid, rank in sorted(rank_of.items(), key=lambda x: x[1]):
        ended = said.get(rank, {}).get("steps")
        per_rank.append({"rank": rank, "ended": ended, "journaled": steps[pid], "dropped": dropped[pid],
                         "unaccounted": None if ended is None else ended - steps[pid] - dropped[pid]})
    ended_all = sum(r["ended"] or 0 for r in per_rank)
    rec_summary = sampler.summary("recorder", t0, time.monotonic())
    return {
        "ranks": ranks, "ranks_attached": len(rank_of), "ranks_reported": len(said),
        "steps_ended": ended_all, "steps_journaled": sum(r["journaled"] for r in per_rank),
        "steps_dropped_said": sum(r["dropped"] for r in per_rank),
        "steps_unaccounted": sum(r["unaccounted"] or 0 for r in per_rank),
        "step_events_per_s_paced": round(ranks / step_s, 1), "burst_steps_per_rank": burst,
        "recorder": rec_summary, "recorder_done_after_workload_s": round(drained_s, 2),
        "summary_written": (run_dir / "summary.json").exists(),
        "worst_ranks": sorted(per_rank, key=lambda r: -(r["unaccounted"] or 0))[:3],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--step-s", type=float, default=0.2, help="each rank's step time while paced (0.2 s: 5 steps/s)")
    ap.add_argument("--burst", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        base = arm(1, args.seconds, args.step_s, args.burst, home)
        many = arm(args.ranks, args.seconds, args.step_s, args.burst, home)
    ratio = None
    if base["recorder"] and many["recorder"] and base["recorder"]["cpu_percent_of_one_core"]:
        ratio = round(many["recorder"]["cpu_percent_of_one_core"] / base["recorder"]["cpu_percent_of_one_core"], 2)
    result = {
        "benchmark": "many_probes", "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join(["python benchmarks/many_probes.py", *sys.argv[1:]]),
        "baseline_1_rank": base, f"{args.ranks}_ranks": many, "ratio_recorder_cpu_vs_1_rank": ratio,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "notes": "lost = ended by the rank - journaled - said dropped by its probe (must be 0); the recorder's CPU "
                 "is its own (all threads), over the run and its drain; the ranks and the recorder share this "
                 "machine's cores",
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("ratio_recorder_cpu_vs_1_rank",)} | {
        str(args.ranks): {k: many[k] for k in ("steps_ended", "steps_journaled", "steps_dropped_said", "steps_unaccounted",
                                    "recorder_done_after_workload_s")}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
