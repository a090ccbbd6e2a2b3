"""`neurondesk export`: Trace Event Format JSON of recorded runs (the journals in tests/data/journals
are real XLA CPU runs), checked against the format's rules: known phases, microsecond timestamps,
integer pid/tid, complete events with durations that nest on each thread, counters with numeric
args, instant events with a scope, metadata naming every process."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import DATA, REPO

from neurondesk.reports import trace_export
from neurondesk.reports.trace_export import ExportRange, write_trace
from neurondesk.sources.rebuild import state_from_run_dir
from neurondesk.store.journal import iter_journal

JOURNALS = DATA / "journals"
PHASES = {"X", "B", "E", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f"}


def check_trace_format(doc: dict) -> list[dict]:
    """The Trace Event Format's rules (the JSON object form); returns the events."""
    assert isinstance(doc["traceEvents"], list) and doc.get("displayTimeUnit") in (None, "ms", "ns")
    events = doc["traceEvents"]
    named = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int), e
        assert isinstance(e["name"], str) and e["name"], e
        if e["ph"] == "M":
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0, e  # microseconds from the run's start
        assert e["pid"] in named, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0, e
            by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] == "C":
            assert e["args"] and all(isinstance(v, int | float) for v in e["args"].values()), e
        elif e["ph"] in ("i", "I"):
            assert e.get("s", "t") in ("g", "p", "t"), e
    for thread, spans in by_thread.items():  # complete events on one thread nest: no partial overlap
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, f"partial overlap on {thread}: {start}-{end} in ..{stack[-1]}"
            stack.append(end)
    return events


def export(name: str, rng: ExportRange | None = None) -> tuple[dict, object]:
    rng = rng or ExportRange()
    run = JOURNALS / name
    state, _ = state_from_run_dir(run)
    out = io.StringIO()
    stats = write_trace(state, iter_journal(run / "events.jsonl", []), out, rng)
    return json.loads(out.getvalue()), stats


def journal(name: str) -> list[dict]:
    return [json.loads(x) for x in (JOURNALS / name / "events.jsonl").read_text().splitlines() if x]


@pytest.mark.parametrize("name", ["plain", "dynamic", "item", "input_bound"])
def test_every_recorded_run_exports_to_a_valid_trace_with_its_steps_and_compiles(name):
    doc, stats = export(name)
    events = check_trace_format(doc)
    steps = [e for e in journal(name) if e["kind"] == "step"]
    drawn = [e for e in events if e.get("cat") == "step"]
    assert len(drawn) == len(steps) == stats.steps
    t0 = journal(name)[0]["t"]
    for d, s in zip(drawn, steps, strict=True):
        assert d["args"]["step"] == s["step"] and d["name"] == f"step {s['step']}"
        assert d["args"]["duration_ms"] == pytest.approx(s["duration_s"] * 1e3)
        # drawn from the previous step's end when the probe's readings overlap them by a hair
        assert d["dur"] == pytest.approx((s["duration_s"] + s.get("eval_s", 0.0)) * 1e6, abs=trace_export.CLAMP_S * 1e6)
        assert d["ts"] + d["dur"] == pytest.approx((s["t"] - t0) * 1e6, abs=1)
        assert d["args"]["samples"] == s.get("samples")
    state, _ = state_from_run_dir(JOURNALS / name)
    compiles = [e for e in events if e.get("cat") == "compile"]
    assert len(compiles) == len(state.compiles)
    for d, c in zip(compiles, sorted(state.compiles, key=lambda c: c.t), strict=True):
        assert (d["args"]["cause"], d["args"]["location"], d["args"]["graph_hash"], d["args"]["cache"]) == (
            c.cause, c.location, c.graph_hash, c.cache)
        assert d["dur"] == pytest.approx((c.duration_s or 0) * 1e6, abs=1)
    names = {e["name"] for e in events if e["ph"] == "C"}
    assert {"cost so far (USD)", "host CPU %", "samples/s"} <= names


def test_data_waits_are_spans_inside_their_steps():
    doc, _ = export("input_bound")
    events = check_trace_format(doc)
    waits = [e for e in events if e.get("cat") == "data_wait"]
    steps = {e["ts"]: e for e in events if e.get("cat") == "step"}
    assert waits and len(waits) == sum(1 for s in journal("input_bound") if s["kind"] == "step" and s["data_wait_s"] > 0)
    for w in waits:
        step = steps[w["ts"]]  # opens its step, on the same thread, and ends inside it
        assert w["tid"] == step["tid"] and w["dur"] <= step["dur"]
        assert w["dur"] == pytest.approx(step["args"]["data_wait_ms"] * 1e3, abs=1)


def test_a_step_range_selects_the_steps_and_the_time_they_cover():
    doc, stats = export("plain", ExportRange(from_step=50, to_step=59))
    events = check_trace_format(doc)
    drawn = [e["args"]["step"] for e in events if e.get("cat") == "step"]
    assert drawn == list(range(50, 60)) and stats.steps == 10
    lo = min(e["ts"] for e in events if e.get("cat") == "step")
    hi = max(e["ts"] + e["dur"] for e in events if e.get("cat") == "step")
    assert all(lo <= e["ts"] <= hi for e in events if e["ph"] in ("C", "i"))
    assert not [e for e in events if e.get("cat") == "compile"]  # both compiles were in steps 0 and 1


def test_past_the_step_budget_steps_are_drawn_in_buckets(monkeypatch):
    monkeypatch.setattr(trace_export, "MAX_STEP_EVENTS", 25)
    doc, stats = export("plain")  # 120 steps, 25 spans at most: buckets of 5
    events = check_trace_format(doc)
    buckets = [e for e in events if e.get("cat") == "steps"]
    assert stats.bucket == 5 and len(buckets) == 24 and not [e for e in events if e.get("cat") == "step"]
    assert buckets[0]["name"] == "steps 0-4" and buckets[0]["args"]["steps"] == 5
    assert sum(b["args"]["steps"] for b in buckets) == 120
    steps = [e for e in journal("plain") if e["kind"] == "step"]
    assert buckets[1]["args"]["max_ms"] == pytest.approx(max(s["duration_s"] for s in steps[5:10]) * 1e3, abs=1e-3)


def test_the_cli_writes_the_file_whole_and_says_what_it_wrote(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(JOURNALS / "item", run)
    out = tmp_path / "run.json"
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "export", str(run), "--format", "chrome", "-o", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    check_trace_format(json.loads(out.read_text()))
    assert p.stderr.startswith("neurondesk: ") and f"written to {out}" in p.stderr
    bad = subprocess.run([sys.executable, "-m", "neurondesk.cli", "export", str(run), "--from-step", "9",
                          "--to-step", "3", "-o", str(out)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == "neurondesk: --to-step 3 is before --from-step 9"
    missing = subprocess.run([sys.executable, "-m", "neurondesk.cli", "export", str(tmp_path / "nope"), "-o",
                              str(tmp_path / "x.json")], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_neuron_core_utilisation_counter_from_a_neuron_monitor_fixture():
    """Fixture (no Trainium here): neuron-monitor reports as documented (tests/data/neuron), parsed
    by the real collector, fed to the export between a recorded run's events."""
    from neurondesk.collectors.devices.neuron_monitor import parse_report
    from neurondesk.core.events.device_events import NeuronSample

    state, _ = state_from_run_dir(JOURNALS / "plain")
    events = list(iter_journal(JOURNALS / "plain" / "events.jsonl", []))
    t0 = events[0].t
    lines = (DATA / "neuron" / "neuron-monitor-trn1.jsonl").read_text().splitlines()
    samples = [parse_report(line, t0 + 5.0 + i) for i, line in enumerate(lines) if line.strip()]
    samples = [s for s in samples if isinstance(s, NeuronSample)]
    owned = [s for s in samples if any(c.utilization is not None and c.owner_pid is not None for c in s.cores)]
    assert owned, "the fixture has cores in use"
    merged = sorted([*events, *samples], key=lambda e: e.t)
    out = io.StringIO()
    write_trace(state, merged, out)
    counters = [e for e in check_trace_format(json.loads(out.getvalue())) if e["name"] == "NeuronCore utilisation %"]
    assert len(counters) == len(owned)
    first = owned[0]
    used = [c.utilization for c in first.cores if c.utilization is not None and c.owner_pid is not None]
    assert counters[0]["args"]["mean"] == pytest.approx(sum(used) / len(used))
    assert counters[0]["ts"] == pytest.approx((first.t - t0) * 1e6, abs=1)


def test_coalesced_step_batches_export_as_the_steps_they_stand_for():
    """The probe journals plain steps as StepBatch records: the plain run's steps coalesced ten by
    ten (those with nothing special) export the same step spans as the steps one by one."""
    from neurondesk.core.events import run_events as ev

    state, _ = state_from_run_dir(JOURNALS / "plain")
    events = list(iter_journal(JOURNALS / "plain" / "events.jsonl", []))
    batched, run = [], []

    def flush():
        if run:
            batched.append(ev.StepBatch(t=run[-1].t, pid=run[0].pid, step=run[0].step, ts=[s.t for s in run],
                                        duration_s=[s.duration_s for s in run], data_wait_s=[s.data_wait_s for s in run],
                                        samples=[s.samples for s in run], tokens=[s.tokens for s in run],
                                        executions=[s.executions for s in run], presync_s=[s.presync_s for s in run],
                                        input_shapes=run[0].input_shapes))
            run.clear()

    for e in events:
        plain = isinstance(e, ev.StepEnded) and not e.compiles and not e.eval_s
        if plain and (not run or (e.step == run[-1].step + 1 and e.input_shapes == run[0].input_shapes)):
            run.append(e)
            if len(run) == 10:
                flush()
            continue
        flush()
        if plain:
            run.append(e)
        else:
            batched.append(e)
    flush()
    assert sum(1 for e in batched if e.kind == "steps") >= 10

    def spans(evs) -> list:
        out = io.StringIO()
        write_trace(state, evs, out)
        return [e for e in check_trace_format(json.loads(out.getvalue())) if e.get("cat") in ("step", "data_wait")]

    assert spans(batched) == spans(events)
