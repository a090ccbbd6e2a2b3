"""Memory that creeps in the outputs that are not the console (issue 36 item 3): the Prometheus
exporter's series (promtool accepts them), summary.md, the HTML report and the alert, all from core's
RunFigures.memory_creep of a reduced 2-rank run whose rank 1 keeps 3 MiB a second."""

from __future__ import annotations

import random
import subprocess

import pytest
from exposition import exposition as series
from exposition import exposition_text
from prometheus_harness import require_prometheus
from test_memory_trend import MiB, _run

from neurondesk.core.events import device_events as dev
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.figures.series import chart_line
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.alert_rules import AlertRules
from neurondesk.core.summary.build import run_summary
from neurondesk.reports.html_report import ReportRun, render
from neurondesk.reports.summary_writer import to_markdown, to_text_table


def leaky(leak: int = 3 * MiB) -> RunState:
    r = random.Random(3)
    state = _run(lambda rank, i: 1000 * MiB + (leak * i if rank == 1 else 0) + r.gauss(0, MiB), world=2)
    state.apply(dev.HostSample(t=200.0, memory_total=64 << 30, memory_available=21 << 30))
    return state



def test_prometheus_has_the_creeping_ranks_pace_and_hours_to_its_limit():
    state = leaky()
    (leak,) = run_figures(state).memory_creep.leaks
    got = series(state)
    (pace,) = got["neurondesk_memory_creep_bytes_per_second"]
    (left,) = got["neurondesk_memory_creep_seconds_to_limit"]
    assert pace.labels == {"job_id": "job", "node": "node", "run_id": "r", "memory": "host_rss", "rank": "1",
                           "device": ""}
    assert pace.value == pytest.approx(leak.bytes_per_hour / 3600)  # core's figures, in base units
    assert left.value == pytest.approx(leak.hours_to_limit * 3600)


def test_no_creep_no_series_and_promtool_accepts_them():
    flat = series(leaky(leak=0))
    assert "neurondesk_memory_creep_bytes_per_second" not in flat and "neurondesk_memory_creep_seconds_to_limit" not in flat
    _, promtool = require_prometheus()
    check = subprocess.run([promtool, "check", "metrics"], input=exposition_text(leaky()), capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_summary_md_the_text_table_and_the_html_report_say_it():
    state = leaky()
    creep = run_figures(state).memory_creep
    summary = run_summary(state)
    md = to_markdown(summary)
    assert "## Memory that creeps" in md and f"- {creep.leaks[0].words}" in md
    row = next(x for x in to_text_table(summary).splitlines() if x.strip().startswith("memory creeps "))
    assert row.endswith(f"  {creep.short.removeprefix('memory creeps: ')}")
    page = render([ReportRun(run_summary(state), chart_line(state.parts.steps, points=50)[0], [], "run")])
    assert 'id="r0-memory-creep"' in page and "rank 1 host RSS +11 GiB an hour since step 3" in page
    flat = leaky(leak=0)
    assert "Memory that creeps" not in to_markdown(run_summary(flat))
    assert "memory-creep" not in render([ReportRun(run_summary(flat), chart_line(flat.parts.steps, points=50)[0], [], "run")])


def test_an_alert_names_each_creep_once():
    state, rules = leaky(), AlertRules()
    (alert,) = [a for a in rules.check(state, 300.0) if a.event == "memory_creep"]
    (leak,) = run_figures(state).memory_creep.leaks
    assert alert.level == "warn" and alert.message == f"memory creeps: {leak.words}"
    assert alert.figures["rank"] == 1 and alert.figures["bytes_per_hour"] == leak.bytes_per_hour
    assert [a for a in rules.check(state, 301.0) if a.event == "memory_creep"] == []  # said once
    assert [a for a in AlertRules().check(leaky(leak=0), 300.0) if a.event == "memory_creep"] == []
