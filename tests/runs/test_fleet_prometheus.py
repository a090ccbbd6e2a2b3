"""Many nodes: a real Prometheus scraping, every second, a live run's recorder and two replayed
nodes (`replay --headless --metrics-addr`); `neurondesk fleet` reads Prometheus's API, including a
node that stops reporting (stale, its last values kept); the deploy/ files checked by the real
tools (promtool; the Grafana dashboard's queries run against this Prometheus)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from conftest import DATA, REPO, base_env
from prometheus_harness import (
    Prometheus,
    free_port,
    http_get,
    require_prometheus,
    start_replay,
    stop,
    wait_for,
)

from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI
from neurondesk.views.fleet import FleetApp

JOB = "job-f"
JOURNALS = DATA / "journals"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    require_prometheus()
    tmp = tmp_path_factory.mktemp("fleet")
    env = base_env(tmp)
    prom = Prometheus(tmp / "prom")
    release = tmp / "release"
    ports = {name: free_port() for name in ("node-live", "node-a", "node-b")}
    procs = {
        "node-live": subprocess.Popen(
            [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.32xlarge",
             "--run-dir", str(tmp / "run"), "--metrics-addr", str(ports["node-live"]), "--job", JOB,
             "--node", "node-live", "--warmup-steps", "2", "--", sys.executable,
             str(DATA / "workloads" / "paced_steps.py"), str(release)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO),
        "node-a": start_replay(JOURNALS / "plain", ports["node-a"], "node-a", JOB, 1.0, env, tmp / "a.log"),
        "node-b": start_replay(JOURNALS / "dynamic", ports["node-b"], "node-b", JOB, 2.0, env, tmp / "b.log"),
    }
    try:
        prom.set_targets({f"127.0.0.1:{port}": node for node, port in ports.items()})
        wait_for(lambda: len(prom.query(f'neurondesk_steps_total{{job_id="{JOB}"}} > 0')) == 3, 60,
                 "Prometheus to hold steps from the three nodes")
        yield prom, procs
    finally:
        release.touch()
        for p in procs.values():
            stop(p)
        prom.stop()


def fleet_json(prom: Prometheus) -> dict:
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "fleet", "--prometheus", prom.url, "--job", JOB,
                        "--once", "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def rows_by_node(out: dict) -> dict[str, dict]:
    return {r["node"]: r for r in out["rows"]}


def test_prometheus_scrapes_the_live_run_and_the_replays_every_second(fleet):
    prom, _ = fleet
    up = {s["metric"]["node_hint"]: s["value"][1] for s in prom.query('up{job="neurondesk"}')}
    assert up == {"node-live": "1", "node-a": "1", "node-b": "1"}
    targets = json.loads(http_get(f"{prom.url}/api/v1/targets")[1])["data"]["activeTargets"]
    assert sorted(t["scrapeInterval"] for t in targets) == ["1s"] * 3
    info = prom.query(f'neurondesk_run_info{{job_id="{JOB}"}}')
    assert {s["metric"]["node"] for s in info} == {"node-live", "node-a", "node-b"}
    assert all(s["metric"]["job"] == "neurondesk" for s in info)  # Prometheus's own job label stays its own


def test_fleet_once_lists_every_node_with_the_job_totals(fleet):
    prom, _ = fleet
    out = wait_for(lambda: (o := fleet_json(prom)) and rows_by_node(o).get("node-live", {}).get("steps_per_s")
                   and o, 30, "a steps/s figure for the live node")
    rows = rows_by_node(out)
    assert set(rows) == {"node-live", "node-a", "node-b"}
    assert all(r["job_id"] == JOB and not r["stale"] and r["step"] > 0 for r in rows.values())
    assert rows["node-live"]["samples_per_s"] > 0 and rows["node-live"]["phase"] in ("running", "input-bound")
    prices = [r["price_per_hour"] for r in rows.values()]
    assert out["totals"]["price_per_hour"] == pytest.approx(sum(prices))
    assert out["totals"]["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows.values()))
    assert out["totals"]["nodes"] == 3 and out["totals"]["stale_nodes"] == 0
    assert out["totals"]["slowest_node"] in rows
    b = rows["node-b"]  # the `dynamic` run: a shape change every step, each one compiled
    assert b["compiles"] >= 1
    # what bounds the live node's steady step, through Prometheus: its 20 ms sleep a step is in no phase
    out = wait_for(lambda: (o := fleet_json(prom)) and rows_by_node(o)["node-live"].get("step_verdict") and o, 30,
                   "the live node's step verdict")
    assert rows_by_node(out)["node-live"]["step_verdict"] == "other-bound"
    assert out["job"]["step_verdicts"]["node-live"] == "other-bound"
    assert any(line.startswith("steady step: ") and "other-bound on node-live" in line for line in out["job"]["lines"])


def test_fleet_screen_shows_the_rows(fleet):
    prom, _ = fleet
    app = FleetApp(FleetReader(PrometheusAPI(prom.url), job=JOB).read, prom.url, refresh_s=0.5, job=JOB)

    async def go() -> tuple[int, str]:
        async with app.run_test(size=(200, 30)) as pilot:
            for _ in range(100):
                await pilot.pause(0.1)
                if app.refreshes >= 2:  # the second one updates the cells in place
                    break
            return len(app.rows), str(app.query_one("#fleet").render()) + str(app.query_one("#totals").render())
    count, totals = asyncio.run(go())  # totals: the table's text, then the totals line
    assert count == 3 and "3 node(s)" in totals and app.refreshes >= 2
    assert all(node in totals for node in ("node-live", "node-a", "node-b"))


def test_grafana_dashboard_queries_run_against_prometheus(fleet):
    prom, _ = fleet
    dash = json.loads((REPO / "deploy" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"].replace("$job", JOB) for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    empty = [e for e in exprs if not prom.query(e)]  # each one is valid PromQL (query() asserts success)
    # these need ranks, neuron-monitor or a compile in progress, which the test nodes do not have
    allowed = ("neurondesk_rank_presync_seconds", "neuroncore_utilization", "compile_started_timestamp",
               "neurondesk_compile_graph", "neurondesk_failure_info", "rank_last_step_timestamp")
    assert all(any(a in e for a in allowed) for e in empty), empty


def test_deploy_prometheus_config_passes_promtool():
    _, promtool = require_prometheus()
    p = subprocess.run([promtool, "check", "config", str(REPO / "deploy" / "prometheus.yml")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_node_that_stops_reporting_is_stale_with_its_last_values(fleet):
    prom, procs = fleet
    before = rows_by_node(fleet_json(prom))["node-b"]
    stop(procs["node-b"])
    out = wait_for(lambda: (o := fleet_json(prom)) and rows_by_node(o)["node-b"]["stale"] and o, 30,
                   "node-b to be marked stale")
    b = rows_by_node(out)["node-b"]
    assert b["step"] >= before["step"] and b["price_per_hour"] == before["price_per_hour"]
    assert b["stale_for_s"] is not None and out["totals"]["stale_nodes"] == 1
    assert not rows_by_node(out)["node-a"]["stale"]
    table = subprocess.run([sys.executable, "-m", "neurondesk.cli", "fleet", "--prometheus", prom.url, "--once"],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
    line = next(x for x in table.stdout.splitlines() if "node-b" in x)
    assert "STALE" in line and "stale: 1" in table.stdout


def test_a_finished_run_is_scraped_finished_after_its_end_not_stale(fleet):
    """The recorder serves the run's final figures for --metrics-grace (60 s) after the workload exits."""
    prom, procs = fleet
    release = next(a for a in procs["node-live"].args if a.endswith("release"))
    open(release, "w").close()  # paced_steps ends a few steps later; `neurondesk run` returns
    procs["node-live"].wait(timeout=120)
    out = wait_for(lambda: (o := fleet_json(prom)) and rows_by_node(o)["node-live"]["finished"] and o, 30,
                   "node-live scraped as finished")
    live = rows_by_node(out)["node-live"]
    assert live["phase"] == "finished" and live["exit_code"] == 0 and not live["stale"]
    assert "node-live" not in out["job"]["stale_nodes"] and out["job"]["failed_node"] is None
    up = {s["metric"]["node_hint"]: s["value"][1] for s in prom.query('up{job="neurondesk"}')}
    assert up["node-live"] == "1"  # `neurondesk run` has returned, its recorder still answers the scrapes
