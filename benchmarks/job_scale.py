"""A job of 64 nodes x 32 ranks, simulated, seen by `fleet` through one real Prometheus: how long a refresh
takes end to end, how many series a node costs, and whether the slow node is named.

    .venv/bin/python benchmarks/job_scale.py [--nodes 64] [--ranks 32] [--refreshes 20]

Each node is a real recorder's exporter (exporter/endpoint.MetricsExporter, the same collector and HTTP
server `run --metrics-addr` uses) over a RunState reduced from synthetic step batches of its 32 ranks (global
ranks, one node 30% slower before the sync), all 64 in this process on their own ports, scraped every second.
Measured in one invocation, so that the machine's load cancels out:
  - `fleet --once --format json` end to end (a new interpreter, its query, the job view): wall per call;
  - the reader's refresh in process (one query + job_view), as the live screen does every second;
  - the baseline: the same HTTP round trip to Prometheus with a trivial query (`vector(1)`), and the ratio;
  - series per node (Prometheus's own count) and per rank.
Results: benchmarks/results/job_scale.json. Needs prometheus on PATH (apt-get install prometheus).
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from prometheus_harness import Prometheus, binaries, wait_for  # noqa: E402

JOB = "bench-job"


def node_state(node: int, ranks: int, slow: bool, now: float):
    from neurondesk.core.events import run_events as ev
    from neurondesk.core.reduce.state import RunState

    s = RunState()
    env = {"TORCHELASTIC_RUN_ID": JOB}
    s.apply(ev.RunStarted(t=now - 600, run_id=f"run-{node:02d}", command=["torchrun"], host=f"trn-{node:02d}",
                          price_per_hour=21.50, warmup_steps=2, job_flag=JOB, launch_env=env))
    for local in range(ranks):
        rank = node * ranks + local
        s.apply(ev.ProcessAttached(t=now - 590, pid=1000 + local, rank=rank, local_rank=local, launch_env={
            **env, "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": "64", "RANK": str(rank), "LOCAL_RANK": str(local),
            "WORLD_SIZE": str(64 * ranks), "LOCAL_WORLD_SIZE": str(ranks)}))
        presync = 0.26 if slow else 0.20
        n = 100
        s.apply(ev.StepBatch(t=now - 1, pid=1000 + local, step=0, ts=[now - 100 + i for i in range(n)],
                             duration_s=[0.3] * n, data_wait_s=[0.01] * n, samples=[8] * n,
                             presync_s=[presync + 0.001 * (local % 3)] * n))
    return s


def start_nodes(nodes: int, ranks: int, slow_node: int):
    from neurondesk.exporter.endpoint import MetricsExporter, parse_metrics_addr

    now, out = time.time(), []
    for i in range(nodes):
        state = node_state(i, ranks, i == slow_node, now)
        exporter = MetricsExporter(parse_metrics_addr("0"))
        exporter.start()
        exporter.publish(state, now, force=True)
        out.append((state, exporter))
    return out


def timed(fn, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "job_scale.json")
    args = ap.parse_args()
    if binaries() is None:
        sys.exit("prometheus/promtool not on PATH: apt-get install prometheus")
    from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI
    from neurondesk.core.job.job_view import job_view

    tmp = Path(tempfile.mkdtemp(prefix="nd-job-bench-"))
    slow = min(args.nodes - 1, args.nodes // 2 + 3)
    nodes = start_nodes(args.nodes, args.ranks, slow)
    prom = Prometheus(tmp / "prom")
    try:
        prom.set_targets({f"127.0.0.1:{e.addr.port}": f"trn-{i:02d}" for i, (_, e) in enumerate(nodes)})
        wait_for(lambda: len(prom.query(f'neurondesk_steps_total{{job_id="{JOB}"}}')) == args.nodes, 120,
                 "every node scraped")
        time.sleep(3)
        api = PrometheusAPI(prom.url)
        reader = FleetReader(api, job=JOB)
        views = []
        read_s = timed(lambda: views.append(job_view(reader.read(), JOB)), args.refreshes)
        base_s = timed(lambda: api.query("vector(1)"), args.refreshes)
        cmd = [sys.executable, "-m", "neurondesk.cli", "fleet", "--prometheus", prom.url, "--job", JOB, "--once",
               "--format", "json"]
        outs: list[str] = []
        cli_s = timed(lambda: outs.append(subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                                                         check=True).stdout), 5)
        interp_s = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), 5)
        series = {s["metric"]["node"]: int(float(s["value"][1])) for s in prom.query(
            f'count by (node) ({{job_id="{JOB}"}})')}
    finally:
        prom.stop()
        for _, e in nodes:
            e.close()
    job = json.loads(outs[-1])["job"]
    view = views[-1]
    per_node = statistics.median(series.values())
    result = {
        "command": f"python benchmarks/job_scale.py --nodes {args.nodes} --ranks {args.ranks} "
                   f"--refreshes {args.refreshes}",
        "nodes": args.nodes, "ranks_per_node": args.ranks, "ranks": len(view.ranks),
        "slow_node": f"trn-{slow:02d}", "named": {"slowest_node": job["slowest_node"],
                                                  "slowest_rank": job["slowest_rank"]},
        "reader_refresh_s": {"median": statistics.median(read_s), "max": max(read_s)},
        "baseline_trivial_query_s": {"median": statistics.median(base_s)},
        "reader_vs_trivial_query": statistics.median(read_s) / statistics.median(base_s),
        "fleet_once_end_to_end_s": {"median": statistics.median(cli_s), "max": max(cli_s)},
        "interpreter_start_s": {"median": statistics.median(interp_s)},
        "fleet_once_minus_interpreter_s": statistics.median(cli_s) - statistics.median(interp_s),
        "series_per_node": {"median": per_node, "max": max(series.values())},
        "series_per_rank_budget": 4, "series_per_node_without_ranks": per_node - 4 * args.ranks,
        "goals": {"refresh <= 1 s (reader, as the live screen)": max(read_s) <= 1.0,
                  "slow node named": job["slowest_node"] == f"trn-{slow:02d}"},
        "load_average_1m": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
