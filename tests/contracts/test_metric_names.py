"""One table of names (core/figures/metric_names.py) that the exporter, the Prometheus reader, the sinks
and summary.json's figures read (issue 43, item 3c): each output's names are the table's, on a
recorded journal replayed through the real exporter and the real frame taker."""

from __future__ import annotations

import re

import msgspec
from conftest import DATA
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from neurondesk.clients import prometheus_api
from neurondesk.core.figures.metric_names import EXPORTED, METRIC_NAMES, SINK_PREFIX, SINK_SCALARS, series
from neurondesk.core.figures.run_figures import FIGURES, RunFigures
from neurondesk.core.summary.build import run_summary
from neurondesk.exporter.endpoint import RunCollector
from neurondesk.exporter.snapshot import Snapshotter
from neurondesk.sinks.frames import FrameTaker, scalars
from neurondesk.sources.rebuild import state_from_run_dir

JOURNAL = DATA / "journals" / "plain"  # priced, steady, compiled: most figures known


def exposition(state) -> dict[str, tuple[str, float]]:
    collector = RunCollector()
    collector.snapshot = Snapshotter("job", "node").take(state, state.last_t)
    registry = CollectorRegistry()
    registry.register(collector)
    return {s.name: (fam.type, s.value) for fam in text_string_to_metric_families(generate_latest(registry).decode())
            for s in fam.samples}


def test_the_table_names_each_thing_once_and_its_figures_are_runfigures_fields():
    keys = [m.key for m in METRIC_NAMES]
    assert len(keys) == len(set(keys))
    exported = [m.metric for m in EXPORTED]
    assert len(exported) == len(set(exported)) and all(re.fullmatch(r"neurondesk_[a-z0-9_]+", m) for m in exported)
    fields = {f.name for f in msgspec.structs.fields(RunFigures)}
    assert {m.key for m in METRIC_NAMES if m.figure} <= fields
    assert not {m.key for m in METRIC_NAMES if not m.figure} & fields  # a quantity of its own is no figure
    assert {info.name for info in FIGURES} <= set(keys)  # every listed figure has its names here
    assert series("total_usd") == "neurondesk_cost_usd_total" and series("price_per_hour") == "neurondesk_price_usd_per_hour"


def test_the_exporter_serves_every_exported_row_and_the_summary_has_every_figure():
    state, _ = state_from_run_dir(JOURNAL)
    got = exposition(state)
    figures = run_summary(state).as_dict()["figures"]  # summary.json's shape
    kind = {m.series: "counter" if m.counter else "gauge" for m in EXPORTED}
    for m in EXPORTED:
        if m.figure:  # an unknown figure has no sample, never a 0
            assert got.get(m.series) == (None if figures[m.key] is None else (kind[m.series], figures[m.key])), m.key
        elif m.series in got:
            assert got[m.series][0] == kind[m.series], m.key
    # mfu, hfu, flops, a compile in progress; the checkpoint write rate, last step and time (no save in this journal)
    assert sum(m.series in got for m in EXPORTED) >= len(EXPORTED) - 8
    assert {m.key for m in METRIC_NAMES if m.figure} <= set(figures)
    named = {name for name in got if name.startswith("neurondesk_")}
    assert {m.series for m in EXPORTED} & named == {m.series for m in EXPORTED if m.series in got}


def test_every_sink_scalar_is_a_row_of_the_table_and_nothing_else():
    state, _ = state_from_run_dir(JOURNAL)
    frame = FrameTaker().take(state, state.last_t)
    out = scalars(frame)
    own = frame.quantities()
    known = {SINK_PREFIX + m.key for m in SINK_SCALARS
             if (getattr(frame.figures, m.key) if m.figure else own[m.key]) is not None}
    assert set(out) == known and len(known) >= 18  # an unknown one (no MFU here) left out, never a 0
    assert out[SINK_PREFIX + "steps"] == frame.figures.steps == 120
    assert out[SINK_PREFIX + "compile_in_progress"] == 0.0 and out[SINK_PREFIX + "loss"] == frame.loss


def test_the_prometheus_reader_asks_for_the_series_the_table_names():
    queries = " ".join(prometheus_api._figures("j", "5m", "30s").values())
    for key in ("steps", "samples_per_s", "step_time_s", "compile_total_s", "price_per_hour", "total_usd",
                "taken_t", "started_t", "model_flops_per_s", "peak_flops_per_s", "data_wait_s"):
        assert series(key) in queries, key
