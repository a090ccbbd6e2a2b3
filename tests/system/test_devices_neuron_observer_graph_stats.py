"""Neuron Observer's Prometheus endpoint (served on loopback from a fixture) and TorchNeuron's
per-rank graph_stats CSVs, read as device samples and graph_stats rows; malformed input is counted,
never raised."""

from __future__ import annotations

import http.server
import threading

from conftest import FIXTURES, REPO

from neurondesk.collectors.devices.graph_stats import GraphStatsFolder, parse_table, read_table
from neurondesk.collectors.devices.neuron_observer import ObserverSampler, parse_exposition, to_sample

DATA = FIXTURES
PROM = DATA / "neuron-observer-trn2-metrics.prom"
GRAPHS = DATA / "graph-stats-two-ranks"


def serve_fixture() -> http.server.HTTPServer:
    """The Observer fixture served on a loopback port, as Neuron Observer serves /metrics."""
    body = PROM.read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_observer_exposition_gives_core_utilisation_and_ecc_and_counts_bad_lines() -> None:
    reading = parse_exposition(PROM.read_text())
    assert reading.problems == 2  # a value that is no number, a label set that does not parse
    sample = to_sample(reading, t=1.0, source="fixture")
    assert sample is not None
    util = {c.core: c.utilization for c in sample.cores}
    assert util == {0: 87.5, 1: 91.0, 2: 12.0}  # the native series wins over its avg aggregate
    assert sample.ecc == [{"mem_ecc_uncorrected": 0, "mem_ecc_corrected": 3}]


def test_observer_read_over_http_on_loopback_and_an_unreachable_one() -> None:
    server = serve_fixture()
    try:
        sampler = ObserverSampler(f"http://127.0.0.1:{server.server_port}/metrics")
        sample = sampler.sample(t=2.0)
        assert sample is not None and len(sample.cores) == 3 and sampler.problems == 2
    finally:
        server.shutdown()
        server.server_close()
    gone = ObserverSampler(f"http://127.0.0.1:{server.server_port}/metrics")
    assert gone.sample(t=3.0) is None and gone.last_error is not None


def test_observer_garbage_is_counted_never_raised() -> None:
    for text in ("", "\0\0\0", "neuron_core_utilization{core=\"0\"", "{}", "neuron_core_ 1e999\n" * 3):
        reading = parse_exposition(text)
        assert to_sample(reading, 0.0, "x") is None


def test_graph_stats_per_rank_rows_become_graph_stat_events() -> None:
    """The documented columns (tests/data/neuron/sdk-2.34/README.md); the rows join dynamo's compiles
    in the reducer (tests/runs/test_neuron_2_34_graph_stats.py); a row none takes is a compile of its own
    (tests/runs/test_graph_stats_own_compiles.py)."""
    folder = GraphStatsFolder(GRAPHS)
    events = folder.poll(t=5.0)
    assert [(e.graph_name, e.compile_s, e.node_count, e.rank) for e in events] == [
        ("forward_graph_0", 41.302117, 1834, 0),
        ("backward_graph_0", 58.711904, 2410, 0),
        ("forward_graph_0", 40.97731, 1834, 1),
    ]
    assert all(e.kind == "neuron_graph_stat" for e in events)
    assert folder.problems == 2  # a row with no name or id, a node count that is no number
    assert folder.poll(t=6.0) == []  # rows already read are not read again


def test_graph_stats_refuses_an_unknown_header_and_a_missing_file(tmp_path) -> None:
    assert parse_table("a,b\n1,2\n", "x.csv").refused is not None
    assert read_table(tmp_path / "none.csv").refused is not None
    assert parse_table("\0\xff,,\n\n", "y.csv").rows == []


def test_telemetry_reads_graph_stats_when_pointed_at_a_folder(tmp_path, monkeypatch) -> None:
    import os
    import queue
    import time

    from neurondesk.collectors import telemetry as tm
    from neurondesk.core.events.device_events import NeuronGraphStat

    monkeypatch.setattr(tm, "collect_inventory", lambda: {"neuron": None, "gpus": []})
    monkeypatch.setattr(tm, "inventory_event", lambda inv: None)
    monkeypatch.setattr(tm.builtin, "locate_cache", lambda env: None)
    monkeypatch.setattr(tm, "find_neuron_tool", lambda *a: None)
    events: queue.SimpleQueue = queue.SimpleQueue()
    t = tm.Telemetry(lambda e: e is not None and events.put(e), env={}, graph_stats=str(GRAPHS))
    t.start(os.getpid())
    seen: list = []
    try:
        deadline = time.monotonic() + 20
        while sum(isinstance(e, NeuronGraphStat) for e in seen) < 3 and time.monotonic() < deadline:
            try:
                seen.append(events.get(timeout=1))
            except queue.Empty:
                pass
    finally:
        t.stop()
    assert sum(isinstance(e, NeuronGraphStat) for e in seen) == 3


def test_run_options_point_a_real_run_at_an_observer_endpoint_and_a_graph_stats_folder(tmp_path) -> None:
    import json
    import subprocess
    import sys

    from conftest import base_env

    server = serve_fixture()
    run_dir = tmp_path / "run"
    try:
        p = subprocess.run(
            [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
             "--neuron-observer", f"http://127.0.0.1:{server.server_port}/metrics", "--graph-stats", str(GRAPHS),
             "--", sys.executable, "-c", "import time; time.sleep(3)"],
            capture_output=True, text=True, timeout=60, env=base_env(tmp_path), cwd=REPO)
    finally:
        server.shutdown()
        server.server_close()
    assert p.returncode == 0, p.stderr
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert sum(e["kind"] == "neuron_graph_stat" for e in events) == 3
    assert any(e["kind"] == "neuron_sample" and len(e["cores"]) == 3 for e in events)
