"""The step phases in the outputs beside the console (issue 36 item 1): the Prometheus exposition's
per-phase gauges and verdict, the Perfetto export's slices per phase inside each step, summary.md's
and the HTML report's "Step phases" section. One reduced run (core's figures), each output read back."""

from __future__ import annotations

import html
import io
import json
import subprocess

import pytest
from exposition import exposition, exposition_text
from prometheus_harness import require_prometheus

from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.figures.series import chart_line
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.reports.html_report import ReportRun, render
from neurondesk.reports.summary_writer import to_markdown
from neurondesk.reports.trace_export import write_trace

PID, T0 = 77, 1_790_000_000.0
PHASES = [0.0, 0.02, 0.015, 0.01, 0.0, 0.0]  # h2d, forward, backward, optimizer, sync, collective
XLA_PHASES = [0.001, 0.01, 0.01, 0.005, 0.05, 0.0]


def events(phases=PHASES, wait=0.041, xla=False, n=12) -> list[ev.Event]:
    out: list[ev.Event] = [ev.RunStarted(t=T0, run_id="phases", command=["python", "train.py"], warmup_steps=5)]
    out += [ev.StepEnded(t=T0 + 1 + 0.1 * i, pid=PID, step=i, duration_s=0.1, data_wait_s=wait, samples=8,
                         phases_s=phases, executions=1 if xla else None) for i in range(n)]
    return out


def reduced(evs: list[ev.Event]) -> RunState:
    st = RunState()
    for e in evs:
        st.apply(e)
    return st



def test_prometheus_has_a_gauge_per_known_phase_and_the_verdict():
    state = reduced(events())
    p = run_figures(state).step_phases
    series = exposition(state)
    got = {s.labels["phase"]: s.value for s in series["neurondesk_step_phase_seconds"]}
    assert got == {"input_wait": pytest.approx(0.041), "forward": pytest.approx(0.02), "backward": pytest.approx(0.015),
                   "optimizer": pytest.approx(0.01), "collective": 0.0, "other": pytest.approx(0.014)}
    assert got == {s.name: s.seconds for s in p.split}  # core's figures, as they are
    assert all(s.labels["job_id"] == "job" and s.labels["node"] == "node" for s in series["neurondesk_step_phase_seconds"])
    (verdict,) = series["neurondesk_step_verdict_info"]
    assert verdict.labels["verdict"] == "input-bound" and verdict.labels["backend"] == "eager-cpu"


def test_promtool_accepts_the_phase_series():
    _, promtool = require_prometheus()
    check = subprocess.run([promtool, "check", "metrics"], input=exposition_text(reduced(events())),
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_prometheus_leaves_out_what_the_backend_cannot_tell_and_is_silent_before_phases():
    xla = {s.labels["phase"] for s in exposition(reduced(events(XLA_PHASES, 0.0, xla=True)))
           ["neurondesk_step_phase_seconds"]}
    assert xla == {"input_wait", "h2d", "collective", "host_tracing", "device_wait", "other"}  # no forward on XLA
    before = exposition(reduced(events(n=3)))  # all in the warm-up: no steady split yet
    assert "neurondesk_step_phase_seconds" not in before and "neurondesk_step_verdict_info" not in before


def trace(evs: list[ev.Event]) -> list[dict]:
    out = io.StringIO()
    write_trace(reduced(evs), evs, out)
    return json.loads(out.getvalue())["traceEvents"]


def test_perfetto_has_a_slice_per_phase_inside_each_step():
    run = events()
    drawn = trace(run)
    steps = [e for e in drawn if e.get("cat") == "step"]
    assert len(steps) == len([e for e in run if e.kind == "step"])
    for step in steps:
        inside = sorted((e for e in drawn if e.get("cat") in ("phase", "data_wait") and e["tid"] == step["tid"]
                         and step["ts"] - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 0.01
                         and e["dur"] > 0), key=lambda e: e["ts"])
        assert [e["name"] for e in inside] == ["data wait", "forward", "backward", "optimizer"]  # other: the gap
        assert [e["dur"] for e in inside] == pytest.approx([41_000, 20_000, 15_000, 10_000], abs=1)
        for a, b in zip(inside, inside[1:], strict=False):  # one after the other, inside the step
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=0.01)
        assert inside[-1]["ts"] + inside[-1]["dur"] <= step["ts"] + step["dur"] + 0.01


def test_perfetto_on_xla_draws_tracing_and_the_device_wait_not_a_forward():
    names = {e["name"] for e in trace(events(XLA_PHASES, 0.0, xla=True)) if e.get("cat") == "phase"}
    assert names == {"h2d", "host tracing", "device wait"}
    plain = trace(events(None, 0.02))  # a journal without phases: the data wait alone, as before
    assert not any(e.get("cat") == "phase" for e in plain) and any(e.get("cat") == "data_wait" for e in plain)


def ranks(n: int = 3) -> list[ev.Event]:
    """``n`` ranks of 0.1 s steps, rank 2's 0.12 s of which it waits 60 ms for data (the others 5 ms)."""
    out: list[ev.Event] = [ev.RunStarted(t=T0, run_id="ranks", command=["torchrun", "train.py"], warmup_steps=5)]
    out += [ev.ProcessAttached(t=T0 + 0.5, pid=PID + r, ppid=1, rank=r, local_rank=r, world_size=n) for r in range(n)]
    out += [ev.StepEnded(t=T0 + 1 + 0.1 * i, pid=PID + r, step=i, duration_s=0.12 if r == 2 else 0.1,
                         data_wait_s=0.06 if r == 2 else 0.005,
                         samples=8, phases_s=[0.0, 0.03, 0.03, 0.01, 0.0, 0.0]) for i in range(12) for r in range(n)]
    return out


def test_summary_md_has_the_step_phases_section_with_the_split_and_the_verdict():
    state = reduced(events())
    s = run_summary(state, state.last_t)
    md = to_markdown(s)
    section = md.split("## Step phases", 1)[1].split("\n## ", 1)[0]
    assert f"**input-bound** — {s.step_phases.words}" in section
    assert ("the steady step of 100.0 ms by each phase's share of 7 steady steps, their mean 100.0 ms (rank 0, "
            "eager-cpu") in section
    for row in ("| input wait | 41.0 ms | 41.0% |", "| forward | 20.0 ms | 20.0% |", "| other | 14.0 ms | 14.0% |",
                "| h2d | — | — |", "| host tracing | — | — |"):  # null: the backend cannot tell (a CPU run)
        assert row in section, section
    assert "## Step phases" not in to_markdown(run_summary(reduced(events(n=3)), T0 + 2))  # none before steady


def test_summary_md_names_each_ranks_verdict_and_the_slowest_ranks_split_on_top():
    state = reduced(ranks())
    section = to_markdown(run_summary(state, state.last_t)).split("## Step phases", 1)[1]
    assert "**input-bound**" in section and "(rank 2, eager-cpu" in section  # the slowest rank's split on top
    # rank 2's timed phases add up to 130 ms of its 120 ms step: scaled into it, the wait is 60 of 130
    assert "- rank 2: input-bound, 120.0 ms/step, largest input wait 46.2%" in section
    assert "- rank 0: compute-bound, 100.0 ms/step" in section


def test_the_html_report_has_the_step_phases_section():
    state = reduced(events())
    s = run_summary(state)
    page = render([ReportRun(s, chart_line(state.parts.steps)[0], [], "/runs/x")])
    section = page.split("<h3>Step phases</h3>", 1)[1].split("<h3>", 1)[0]
    assert f'<p id="step-verdict"><b>input-bound</b> — {html.escape(s.step_phases.words)}</p>' in section
    assert "<td>input wait</td><td class=num>41.0 ms</td><td class=num>41.0%</td>" in section
    assert "<td>h2d</td><td class=num>—</td>" in section
    assert 'aria-label="time breakdown"' in section and "input wait: 41.0 ms · 41.0%" in section  # its bar
