"""The recorder's OpenMetrics endpoint on a real run (a real workload under `neurondesk run`):
`promtool check metrics` on its text exposition, OpenMetrics by content negotiation, the names
and labels the fleet and the dashboards rely on; and the --metrics-addr rules."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import DATA, REPO, base_env
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_harness import free_port, http_get, require_prometheus, stop, wait_for

from neurondesk.cli.main import main
from neurondesk.exporter.endpoint import MetricsExporter, parse_metrics_addr
from neurondesk.exporter.viewer import publish_on_poll
from neurondesk.sources.replay import ReplaySource

# the exporter under the newest prometheus_client too (make test-latest)
pytestmark = pytest.mark.latest

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    port = free_port()
    release = tmp / "release"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn1.32xlarge",
           "--run-dir", str(tmp / "run"), "--metrics-addr", str(port), "--job", "job-7", "--node", "node-a",
           "--warmup-steps", "2", "--", sys.executable, str(DATA / "workloads" / "paced_steps.py"), str(release)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=base_env(tmp), cwd=REPO)
    url = f"http://127.0.0.1:{port}/metrics"

    def steady() -> bool:
        text = http_get(url)[1]
        return "neurondesk_steady_samples_per_second{" in text and "neurondesk_steps_total{" in text
    try:
        wait_for(steady, 90, f"steady figures on {url}")
        yield url, proc, release, tmp
    finally:
        release.touch()
        try:
            proc.wait(timeout=60)
        finally:
            stop(proc)


def test_promtool_accepts_the_live_exposition(live, tmp_path):
    _, promtool = require_prometheus()
    ctype, text = http_get(live[0])
    assert ctype.startswith("text/plain")
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr  # lint problems are printed and fail too


def test_openmetrics_by_negotiation_with_names_and_labels(live):
    ctype, text = http_get(live[0], accept=OPENMETRICS)
    assert ctype.startswith("application/openmetrics-text") and text.rstrip().endswith("# EOF")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, kind in [("neurondesk_steps", "counter"), ("neurondesk_samples", "counter"),
                       ("neurondesk_step_duration_seconds", "histogram"), ("neurondesk_compile_in_progress", "gauge"),
                       ("neurondesk_cost_usd", "counter"), ("neurondesk_price_usd_per_hour", "gauge"),
                       ("neurondesk_run", "info"), ("neurondesk_phase", "gauge"), ("neurondesk_loss", "gauge")]:
        assert families[name].type == kind, name
    steps = families["neurondesk_steps"].samples[0]
    assert steps.name == "neurondesk_steps_total" and steps.value > 0
    assert {"job_id": "job-7", "node": "node-a"}.items() <= steps.labels.items()
    assert not {"job", "instance"} & set(steps.labels)  # Prometheus sets those itself
    info = families["neurondesk_run"].samples[0].labels
    assert info["instance_type"] == "trn1.32xlarge" and info["run_id"]
    price = families["neurondesk_price_usd_per_hour"].samples[0].value
    assert price > 0
    phases = {s.labels["phase"]: s.value for s in families["neurondesk_phase"].samples}
    assert sum(phases.values()) == 1 and phases["running"] == 1
    hist = families["neurondesk_step_duration_seconds"].samples
    count = next(s.value for s in hist if s.name.endswith("_count"))
    assert count > 0 and next(s.value for s in hist if s.labels.get("le") == "+Inf") == count


def test_counters_only_go_up_between_scrapes(live):
    def total() -> float:
        text = http_get(live[0])[1]
        line = next(x for x in text.splitlines() if x.startswith("neurondesk_samples_total{"))
        return float(line.rsplit(" ", 1)[1])
    first = total()
    wait_for(lambda: total() > first, 30, "more samples")


def test_attach_serves_the_metrics_of_its_own_state(live):
    """`attach --metrics-addr`: a viewer's RunState, published by its poll loop."""
    port = free_port()
    tmp = live[3]
    viewer = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "attach", str(tmp / "run"), "--headless",
                               "--metrics-addr", str(port), "--node", "viewer"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base_env(tmp), cwd=REPO)
    try:
        text = wait_for(lambda: (t := http_get(f"http://127.0.0.1:{port}/metrics")[1]) and
                        'node="viewer"' in t and "neurondesk_steps_total{" in t and t, 60, "the viewer's metrics")
        line = next(x for x in text.splitlines() if x.startswith("neurondesk_steps_total{"))
        assert float(line.rsplit(" ", 1)[1]) > 0
    finally:
        stop(viewer)


def test_a_viewer_publishes_through_its_sources_after_poll_hook():
    """The exporter is fed by the source's own hook, after each poll applied its events, on the poll's
    thread: nothing of the source is replaced."""
    source = ReplaySource(DATA / "journals" / "plain", speed=0)
    exporter = MetricsExporter(parse_metrics_addr("0"), "job-r", "viewer")  # not served: the snapshot is read
    publish_on_poll(source, exporter)
    assert "poll" not in vars(source) and len(source.after_poll) == 1
    assert exporter.collector.snapshot is None
    source.poll()
    snapshot = exporter.collector.snapshot
    assert snapshot is not None and snapshot.figures.steps == source.state.steps_done == 120
    assert snapshot.identity.node == "viewer" and snapshot.finished


def test_headless_replay_without_metrics_plays_and_ends():
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "replay", str(DATA / "journals" / "plain"),
                        "--headless", "--instant"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0 and "step 120" in p.stdout and "finished (exit 0)" in p.stdout


def test_metrics_addr_rules(capsys):
    assert parse_metrics_addr("9400") == parse_metrics_addr("127.0.0.1:9400")
    assert parse_metrics_addr("[::1]:9400").loopback and not parse_metrics_addr("0.0.0.0:9400").loopback
    for bad in ("abc", ":9400", "host:99999"):
        with pytest.raises(SystemExit):
            main(["replay", str(DATA / "journals" / "plain"), "--headless", "--metrics-addr", bad])
        assert "expected [HOST:]PORT" in capsys.readouterr().err
