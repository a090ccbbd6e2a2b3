"""The node health series through a real Prometheus (issue 33 item 8): a recorder's exporter serves
the counters of two Neuron Observer scrapes (fixtures composed from the documented format: no
Trainium, no EFA here), Prometheus scrapes it every second, and the PromQL docs/fleet.md gives
(core/node_health.increase_query) answers per node what core/node_health.words_from_series says."""

from __future__ import annotations

import re

from conftest import FIXTURES
from prometheus_harness import Prometheus, free_port, require_prometheus, wait_for

from neurondesk.collectors.devices.neuron_observer import parse_exposition
from neurondesk.collectors.devices.neuron_observer_health import health_sample
from neurondesk.core.events import run_events as ev
from neurondesk.core.node.node_health import COUNTERS, SERIES, increase_query, words_from_series
from neurondesk.core.reduce.state import RunState
from neurondesk.exporter.endpoint import MetricsAddr, MetricsExporter

DATA = FIXTURES
JOB = "job-health"


def _scrape(k: int, t: float):
    return health_sample(parse_exposition((DATA / f"neuron-observer-trn2-health-{k}.prom").read_text()), t,
                         "neuron-observer http://127.0.0.1:7001/metrics")


def test_increase_over_a_minute_per_node_through_prometheus_fixture(tmp_path) -> None:
    require_prometheus()
    state = RunState()
    state.apply(ev.RunStarted(t=999.0, run_id="r1", command=["train.py"]))
    state.apply(_scrape(1, 1000.0))
    exporter = MetricsExporter(MetricsAddr("127.0.0.1", free_port()), job_id=JOB, node="trn-07")
    exporter.start()
    prom = Prometheus(tmp_path / "prom")
    try:
        exporter.publish(state, 1000.0, force=True)
        prom.set_targets({str(exporter.addr): "trn-07"})
        retrans = f'{SERIES["efa_retransmits"]}{{job_id="{JOB}"}}'
        wait_for(lambda: [r for r in prom.query(retrans) if r["value"][1] == "6577"], 30, "the first counts scraped")
        state.apply(_scrape(2, 1060.0))
        exporter.publish(state, 1060.0, force=True)
        wait_for(lambda: [r for r in prom.query(retrans) if r["value"][1] == "6989"], 30, "the second counts scraped")

        def answers() -> dict[str, float]:
            out = {}
            for counter in COUNTERS:
                expr = increase_query(counter).replace(SERIES[counter], f'{SERIES[counter]}{{job_id="{JOB}"}}')
                for r in prom.query(expr):
                    assert r["metric"] == {"job_id": JOB, "node": "trn-07"}  # one answer per job and node
                    out[SERIES[counter]] = float(r["value"][1])
            return out
        got = wait_for(lambda: (a := answers()) and a.get(SERIES["efa_retransmits"], 0) > 0 and a, 30,
                       "an increase of the retransmits")
    finally:
        prom.stop()
        exporter.close()
    # Prometheus extrapolates an increase to the window's edges: at least what grew, never twice
    assert 412 <= got[SERIES["efa_retransmits"]] < 2 * 412
    assert got[SERIES["throttle_events"]] == 0.0 and SERIES["sram_ecc_uncorrected"] not in got  # not measured
    said = words_from_series("trn-07", got)
    m = re.fullmatch(r"trn-07: (\d+) uncorrected HBM ECC errors?, (\d+) NeuronLink errors, (\d+) EFA errors, "
                     r"(\d+) EFA retransmits, (\d+) corrected HBM ECC errors in the last minute", said or "")
    assert m is not None, said
    for said_n, grew in zip((int(x) for x in m.groups()), (1, 2, 3, 412, 7), strict=True):
        assert grew <= said_n <= 2 * grew
