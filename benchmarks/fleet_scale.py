"""64 replayed nodes scraped every second by a real Prometheus; what it costs.

    .venv/bin/python benchmarks/fleet_scale.py [--nodes 64] [--window 60]

Each node is `neurondesk replay tests/data/journals/dynamic --headless --speed 1 --metrics-addr PORT`
(a real process serving a recorded XLA run as if live); 8 more replay the same journal without
--metrics-addr as the control; 4 static-file HTTP servers holding the same exposition are scraped too,
as the machine's own scrape latency under the same load. In one window, measured together:
  - exporter cost per node: CPU share of a metrics node minus that of a control node (goal <= 1% of a core)
  - scrape duration p99 per target, from Prometheus's own scrape_duration_seconds (goal <= 20 ms)
  - `neurondesk fleet` at 1 s refresh: the Textual screen (headless, App.run_test) reading Prometheus
    for the whole window, its process CPU share (goal <= 10% of a core)
Results: benchmarks/results/fleet_scale.json. Needs prometheus on PATH (apt-get install prometheus).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from prometheus_harness import Prometheus, binaries, free_port, start_replay, stop, wait_for  # noqa: E402

JOURNAL = REPO / "tests" / "data" / "journals" / "dynamic"
CONTROLS = 8
BASELINES = 4  # static-file HTTP servers with the same exposition: the machine's own scrape latency
SCREEN = """
import asyncio, json, sys, time
from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI
from neurondesk.views.fleet import FleetApp
url, window = sys.argv[1], float(sys.argv[2])
app = FleetApp(FleetReader(PrometheusAPI(url), job="bench").read, url, refresh_s=1.0)
async def go():
    async with app.run_test(size=(200, 80)) as pilot:
        while not app.refreshes:
            await pilot.pause(0.1)
        cpu0, t0, n0 = time.process_time(), time.monotonic(), app.refreshes
        await pilot.pause(window)
        rows = len(app.rows)
        return time.process_time() - cpu0, time.monotonic() - t0, app.refreshes - n0, rows
cpu, wall, refreshes, rows = asyncio.run(go())
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "refreshes": refreshes, "rows": rows}))
"""


def _exporter_for_journal():
    from neurondesk.exporter.endpoint import MetricsExporter, parse_metrics_addr
    from neurondesk.sources.rebuild import state_from_run_dir

    state, _ = state_from_run_dir(JOURNAL)
    exporter = MetricsExporter(parse_metrics_addr("0"), "baseline", "static")  # not in fleet --job bench
    exporter.publish(state, state.last_t, force=True)
    return state, exporter


def render_text() -> str:
    from prometheus_client import generate_latest

    return generate_latest(_exporter_for_journal()[1].registry).decode()


def render_cost_ms() -> dict[str, float]:
    """In-process: one snapshot of the whole journal rendered as a scrape renders it (no HTTP, no scheduling)."""
    from prometheus_client import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    state, exporter = _exporter_for_journal()
    out = {}
    for name, render in (("text", generate_latest), ("openmetrics", generate_openmetrics)):
        t0 = time.process_time()
        for _ in range(200):
            render(exporter.registry)
        out[name] = (time.process_time() - t0) / 200 * 1000
    t0 = time.process_time()
    for _ in range(200):
        exporter.snapshotter.take(state, state.last_t)
    out["snapshot"] = (time.process_time() - t0) / 200 * 1000
    return out


def cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "fleet_scale.json")
    args = ap.parse_args()
    if binaries() is None:
        sys.exit("prometheus/promtool not on PATH: apt-get install prometheus")
    tmp = Path(tempfile.mkdtemp(prefix="nd-fleet-bench-"))
    started, load_start = time.monotonic(), os.getloadavg()
    render_ms = render_cost_ms()
    prom = Prometheus(tmp / "prom")
    ports = [free_port() for _ in range(args.nodes)]
    nodes = [start_replay(JOURNAL, port, f"node-{i:02d}", "bench", 1.0) for i, port in enumerate(ports)]
    controls = [subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "replay", str(JOURNAL), "--headless"],
                                 stdout=subprocess.DEVNULL, cwd=REPO) for _ in range(CONTROLS)]
    static = tmp / "static"
    static.mkdir()
    (static / "metrics").write_text(render_text())
    base_ports = [free_port() for _ in range(BASELINES)]
    baselines = [subprocess.Popen([sys.executable, "-m", "http.server", str(p), "--bind", "127.0.0.1"],
                                  cwd=static, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in base_ports]
    screen = None
    try:
        prom.set_targets({**{f"127.0.0.1:{p}": f"node-{i:02d}" for i, p in enumerate(ports)},
                          **{f"127.0.0.1:{p}": "static" for p in base_ports}})
        wait_for(lambda: len(prom.query('up{job="neurondesk"} == 1')) == args.nodes + BASELINES, 120,
                 "every node up")
        time.sleep(5)  # warm: every node has been scraped a few times
        screen = subprocess.Popen([sys.executable, "-c", SCREEN, prom.url, str(args.window)],
                                  stdout=subprocess.PIPE, text=True, cwd=REPO)
        procs = {"nodes": [psutil.Process(p.pid) for p in nodes], "controls": [psutil.Process(p.pid) for p in controls],
                 "prometheus": [psutil.Process(prom.proc.pid)]}
        before = {k: [cpu_s(p) for p in v] for k, v in procs.items()}
        t0 = time.monotonic()
        time.sleep(args.window)
        wall = time.monotonic() - t0
        share = {k: [(cpu_s(p) - b) / wall for p, b in zip(v, before[k], strict=True)] for k, v in procs.items()}
        rng = f"{int(args.window)}s"
        p99 = [float(s["value"][1]) for s in prom.query(
            f'quantile_over_time(0.99, scrape_duration_seconds{{job="neurondesk",node_hint!="static"}}[{rng}])')]
        static_p99 = [float(s["value"][1]) for s in prom.query(
            f'quantile_over_time(0.99, scrape_duration_seconds{{job="neurondesk",node_hint="static"}}[{rng}])')]
        scrapes = [float(s["value"][1]) for s in prom.query(
            f'count_over_time(scrape_duration_seconds{{job="neurondesk",node_hint!="static"}}[{rng}])')]
        replaying = len(prom.query('neurondesk_phase{job_id="bench",phase="finished"} == 0'))
        out, _ = screen.communicate(timeout=args.window + 120)
        fleet = json.loads(out.strip().splitlines()[-1])
    finally:
        for p in [*nodes, *controls, *baselines]:
            stop(p)
        if screen is not None:
            stop(screen)
        prom.stop()
    node_mean, ctrl_mean = statistics.mean(share["nodes"]), statistics.mean(share["controls"])
    exporter = node_mean - ctrl_mean
    fleet_share = fleet["cpu_s"] / fleet["wall_s"]
    result = {
        "command": f"python benchmarks/fleet_scale.py --nodes {args.nodes} --window {args.window:g}",
        "machine": {"cpus": psutil.cpu_count(), "python": platform.python_version(),
                    "prometheus": subprocess.run([binaries()[0], "--version"], capture_output=True,
                                                 text=True).stdout.splitlines()[0]},
        "nodes": args.nodes, "controls": CONTROLS, "scrape_interval_s": 1, "window_s": round(wall, 1),
        "nodes_still_replaying_at_end": replaying,
        "scrapes_per_target": {"min": min(scrapes), "median": statistics.median(scrapes)},
        "node_cpu_share": {"mean": node_mean, "max": max(share["nodes"])},
        "control_cpu_share": {"mean": ctrl_mean, "max": max(share["controls"])},
        "exporter_cpu_share_per_node": exporter,
        "scrape_duration_p99_s": {"max_over_targets": max(p99), "median_over_targets": statistics.median(p99),
                                  "static_file_baseline_max": max(static_p99),
                                  "static_file_baseline_median": statistics.median(static_p99),
                                  "median_vs_static_baseline": statistics.median(p99) / statistics.median(static_p99)},
        "fleet_screen": {**fleet, "cpu_share": fleet_share},
        "prometheus_cpu_share": share["prometheus"][0],
        "goals": {"exporter_per_node <= 0.01 core": exporter <= 0.01,
                  "scrape_p99_per_target <= 0.020 s": max(p99) <= 0.020,
                  "fleet_1s_refresh <= 0.10 core": fleet_share <= 0.10},
        "exposition_render_ms": render_ms,
        "load_average_1m": {"start": load_start[0], "end": os.getloadavg()[0]},
        "total_runtime_s": round(time.monotonic() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
