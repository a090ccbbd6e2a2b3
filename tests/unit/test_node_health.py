"""Node health as a cause (issue 33 item 8): Neuron Observer's EFA / NeuronLink / ECC / throttling
counters and neuron-monitor's ECC counters (fixtures composed from the documented formats: no
Trainium, no EFA here), reduced to what grew over the last minute, said in one line, shown in the
diagnostics and summary.json, and exported as per-node counters that Prometheus's increase() reads."""

from __future__ import annotations

import http.server
import math
import threading

import pytest
from conftest import FIXTURES
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from neurondesk.collectors.devices.neuron_monitor import parse_report
from neurondesk.collectors.devices.neuron_observer import ObserverSampler, parse_exposition
from neurondesk.collectors.devices.neuron_observer_health import health_sample, observer_events
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.device_events import NeuronSample, NodeHealthSample
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.node.node_health import (
    SERIES,
    NodeHealth,
    health_words,
    increase_query,
    words_from_series,
)
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.exporter.endpoint import RunCollector
from neurondesk.exporter.snapshot import Snapshotter

DATA = FIXTURES
SCRAPES = [DATA / f"neuron-observer-trn2-health-{k}.prom" for k in (1, 2)]  # 60 s apart
MONITOR_ECC = DATA / "neuron-monitor-execution-errors-ecc-group-errors.jsonl"
SOURCE = "neuron-observer http://127.0.0.1:7001/metrics"
SAID = ("trn-07: 1 uncorrected HBM ECC error, 2 NeuronLink errors, 3 EFA errors, 412 EFA retransmits, "
        "7 corrected HBM ECC errors in the last minute")


def _health(k: int, t: float) -> NodeHealthSample:
    sample = health_sample(parse_exposition(SCRAPES[k].read_text()), t, SOURCE)
    assert sample is not None
    return sample


def _state(*events: ev.Event) -> RunState:
    state = RunState()
    state.apply(ev.RunStarted(t=999.0, run_id="r1", command=["train.py"]))
    for e in events:
        state.apply(e)
    return state


# ---------------------------------------------------------------- the collector (fixtures)


def test_observer_health_counters_summed_over_devices_fixture() -> None:
    reading = parse_exposition(SCRAPES[1].read_text())
    assert reading.problems == 2  # a value that is no number, a label set that does not close
    sample = health_sample(reading, 1060.0, SOURCE)
    assert sample is not None and sample.source == SOURCE
    # the native per-device ECC series are taken, never with their _sum aggregate too (22, not 44);
    # throttling came only as a _sum aggregate, so that one is taken; tx_bytes is no health counter
    assert sample.counters == {"efa_retransmits": 6989.0, "efa_errors": 8.0, "neuronlink_errors": 7.0,
                               "hbm_ecc_corrected": 22.0, "hbm_ecc_uncorrected": 1.0, "throttle_events": 2.0}
    assert sample.names["efa_errors"] == ["neuron_efa_impaired_remote_conn_events",
                                          "neuron_efa_retrans_timeout_events"]
    assert sample.names["hbm_ecc_corrected"] == ["neuron_device_mem_ecc_corrected"]
    assert event_from_dict(event_to_dict(sample)) == sample


def test_an_endpoint_without_health_counters_gives_no_health_sample_fixture() -> None:
    reading = parse_exposition((DATA / "neuron-observer-trn2-metrics.prom").read_text())
    sample = health_sample(reading, 1.0, SOURCE)
    # that scrape has ECC counters only: they are health counters, read natively per device
    assert sample is not None and sample.counters == {"hbm_ecc_uncorrected": 0.0, "hbm_ecc_corrected": 3.0}
    assert health_sample(parse_exposition("process_cpu_seconds_total 1\nnot a line\n"), 1.0, SOURCE) is None


def test_one_scrape_of_a_served_endpoint_gives_both_events_fixture() -> None:
    body = SCRAPES[0].read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sampler = ObserverSampler(f"http://127.0.0.1:{server.server_address[1]}/metrics")
        got = observer_events(sampler, 1000.0)
    finally:
        server.shutdown()
        server.server_close()
    assert [type(e) for e in got] == [NeuronSample, NodeHealthSample]
    assert got[1].counters["efa_retransmits"] == 6577.0 and sampler.problems == 2
    assert observer_events(ObserverSampler("http://127.0.0.1:9/metrics"), 1.0) == []  # unreachable: nothing


# ---------------------------------------------------------------- the reducer


def test_what_grew_over_the_last_minute_is_said_fixture() -> None:
    state = _state(_health(0, 1000.0), _health(1, 1060.0))
    h = state.parts.telemetry.health.health("trn-07")
    assert h is not None and h.window_s == 60.0 and h.sources == [SOURCE]
    assert h.recent == {"efa_retransmits": 412.0, "efa_errors": 3.0, "neuronlink_errors": 2.0,
                        "hbm_ecc_corrected": 7.0, "hbm_ecc_uncorrected": 1.0, "throttle_events": 0.0}
    assert health_words(h) == SAID


def test_the_window_slides_and_a_counter_that_restarts_grew_by_its_new_value() -> None:
    state = _state()
    health = state.parts.telemetry.health
    for t, n in ((0.0, 100.0), (30.0, 150.0), (70.0, 160.0), (100.0, 20.0)):
        state.apply(NodeHealthSample(t=t, source=SOURCE, counters={"efa_retransmits": n}))
    h = health.health("n")
    # kept: the sample at 30 s (the last at or before 100 - 60) onwards: +10, then a restart to 20
    assert h.recent == {"efa_retransmits": 30.0} and h.totals == {"efa_retransmits": 20.0}
    state.apply(NodeHealthSample(t=99.0, source=SOURCE, counters={"efa_retransmits": 1e6}))  # out of order
    assert health.health("n").totals == {"efa_retransmits": 20.0}


def test_neuron_monitor_ecc_counters_and_a_short_window_fixture() -> None:
    lines = MONITOR_ECC.read_text().splitlines()
    samples = [parse_report(line, 1000.0 + i) for i, line in enumerate(lines)]
    assert all(isinstance(s, NeuronSample) for s in samples)
    state = _state(*samples)
    h = state.parts.telemetry.health.health("trn-03")
    assert h.sources == ["neuron-monitor"] and h.totals["hbm_ecc_uncorrected"] == 1.0
    assert h.recent["hbm_ecc_uncorrected"] == 1.0 and h.recent["hbm_ecc_corrected"] == 0.0
    assert health_words(h) == "trn-03: 1 uncorrected HBM ECC error in the last 2 s"


def test_observer_device_samples_are_not_counted_twice() -> None:
    sampled = NeuronSample(t=1000.0, raw=SOURCE, ecc=[{"mem_ecc_corrected": 500}])  # Observer's own NeuronSample
    state = _state(sampled, _health(0, 1000.0), _health(1, 1060.0))
    assert state.parts.telemetry.health.health("trn-07").totals["hbm_ecc_corrected"] == 22.0


# ---------------------------------------------------------------- the words


def test_a_healthy_node_has_no_words_and_an_old_uncorrected_error_is_still_said() -> None:
    assert health_words(NodeHealth(node="a", totals={"efa_retransmits": 9e6}, recent={"efa_retransmits": 0.0},
                                   window_s=60.0)) is None
    assert health_words(NodeHealth(node="a")) is None
    said = health_words(NodeHealth(node="trn-02", totals={"hbm_ecc_uncorrected": 2.0, "efa_retransmits": 10.0},
                                   recent={"efa_retransmits": 1.0}, window_s=60.0))
    assert said == "trn-02: 1 EFA retransmit in the last minute; 2 uncorrected HBM ECC errors since the device started"


def test_words_from_prometheus_answers() -> None:
    assert increase_query("efa_retransmits") == "sum by (job_id, node) (increase(neurondesk_efa_retransmits_total[1m]))"
    # increase() extrapolates: a fraction rounds in the words; NaN (no samples) and others' names count as nothing
    said = words_from_series("trn-07", {SERIES["efa_retransmits"]: 411.7, SERIES["neuronlink_errors"]: math.nan,
                                        "node_network_receive_errs_total": 5.0})
    assert said == "trn-07: 412 EFA retransmits in the last minute"
    assert words_from_series("trn-07", {"efa_retransmits": 0.0}, {SERIES["hbm_ecc_uncorrected"]: 1.0}) == \
        "trn-07: 1 uncorrected HBM ECC error since the device started"
    assert words_from_series("trn-01", {SERIES["efa_retransmits"]: 0.0}) is None


# ---------------------------------------------------------------- shown and exported


def test_diagnostics_and_summary_carry_the_words_fixture() -> None:
    state = _state(_health(0, 1000.0), _health(1, 1060.0))
    found = [d for d in diagnostics(state) if d.kind == "node-health"]
    assert [d.message.split(": ", 1)[1] for d in found] == [SAID.split(": ", 1)[1]]
    summary = run_summary(state, 1061.0).as_dict()
    health = summary["neuron"]["node_health"]
    assert health["totals"]["efa_retransmits"] == 6989.0 and health["last_minute"]["efa_retransmits"] == 412.0
    assert health["words"].endswith("412 EFA retransmits, 7 corrected HBM ECC errors in the last minute")


def test_health_counters_are_exported_per_node_fixture() -> None:
    state = _state(_health(0, 1000.0), _health(1, 1060.0))
    collector = RunCollector()
    collector.snapshot = Snapshotter("job-7", "trn-07").take(state, 1061.0)
    registry = CollectorRegistry()
    registry.register(collector)
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    labels = {"job_id": "job-7", "node": "trn-07", "run_id": "r1"}
    for counter, value in (("efa_retransmits", 6989.0), ("efa_errors", 8.0), ("neuronlink_errors", 7.0),
                           ("hbm_ecc_uncorrected", 1.0), ("hbm_ecc_corrected", 22.0), ("throttle_events", 2.0)):
        family = families[f"neurondesk_{counter}"]
        assert family.type == "counter"
        [sample] = family.samples
        assert (sample.name, sample.labels, sample.value) == (SERIES[counter], labels, pytest.approx(value))
    assert families["neurondesk_sram_ecc_uncorrected"].samples == []  # not reported: no sample, not 0
