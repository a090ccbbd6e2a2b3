"""Well-typed but absurd probe messages are refused at the boundary, counted, never believed (issue
24, item 4): a step numbered 10**30, a 3,600 s compile in a 2 s run, a negative data wait. And the
run index keeps a run's row whatever huge whole number its summary holds."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

from conftest import REPO, base_env

from neurondesk.collectors.probe_messages import MAX_STEP, ProbeDecoder
from neurondesk.core.events import run_events as ev
from neurondesk.core.summary.types import load_summary
from neurondesk.store.index import RunIndex


def _line(d: dict) -> bytes:
    return json.dumps(d).encode() + b"\n"


STEP = {"kind": "step", "t": 101.0, "pid": 7, "step": 3, "duration_s": 0.02, "samples": 8, "data_wait_s": 0.001}
ABSURD = [
    {**STEP, "step": 10**30},
    {**STEP, "step": -1},
    {**STEP, "data_wait_s": -0.5},
    {**STEP, "duration_s": 3600.0},
    {**STEP, "samples": -8},
    {**STEP, "pid": 0},
    {**STEP, "t": 1e300},
    {"kind": "compile", "t": 101.5, "pid": 7, "source": "probe", "step": 1, "duration_s": 3600.0,
     "location": "/etc/passwd:1"},
    {"kind": "compile", "t": 101.5, "pid": 7, "source": "probe", "step": 1, "duration_s": 0.1,
     "input_shapes": [[2, -3]]},
    {"kind": "probe_dropped", "t": 101.0, "pid": 7, "dropped": -1},
    {"kind": "process_attached", "t": 100.5, "pid": 7, "rank": -2},
]


def test_absurd_messages_are_parse_problems_counted_and_sane_ones_pass():
    d = ProbeDecoder(started_t=100.0)  # a run 2.7 s old when they arrive
    for msg in ABSURD:
        [e] = d.decode(_line(msg), 102.7)
        assert isinstance(e, ev.ParseProblem), msg
        assert e.error.startswith("out of range: ") and e.source == "probe" and e.raw, e.error
    assert d.refused == len(ABSURD)
    [e] = d.decode(_line(STEP), 102.7)
    assert isinstance(e, ev.StepEnded) and e.step == 3
    [e] = d.decode(_line({**STEP, "step": MAX_STEP, "duration_s": 2.7}), 102.7)
    assert isinstance(e, ev.StepEnded)
    assert d.refused == len(ABSURD)
    # without a run start only the fixed bounds hold (the decoder used alone, on old lines)
    [e] = ProbeDecoder().decode(_line({**STEP, "duration_s": 3600.0}), 5.0)
    assert isinstance(e, ev.StepEnded)


def test_a_huge_step_count_in_a_summary_keeps_its_index_row(tmp_path):
    index = RunIndex(tmp_path / "index.sqlite")
    summary = {"summary_version": 2, "run_id": "huge", "started_at": "2026-12-01T10:00:00+00:00", "steps": 10**30, "exit_code": 0,
               "command": ["python", "x.py"]}
    index.record(load_summary(summary), tmp_path / "huge")
    [row] = index.list_runs()
    assert row.id == "huge" and row.steps is None and row.summary.steps == 10**30
    with sqlite3.connect(tmp_path / "index.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)


# A workload that writes to the recorder's probe socket itself, as any process of the run can.
FORGER = """
import json, os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["NEURONDESK_SOCKET"])
pid, now = os.getpid(), time.time()
msgs = [
    {"kind": "step", "t": now, "pid": pid, "step": 10**30, "duration_s": 0.01, "samples": 4},
    {"kind": "step", "t": now, "pid": pid, "step": 1, "duration_s": 0.01, "samples": 4, "data_wait_s": -5.0},
    {"kind": "compile", "t": now, "pid": pid, "source": "probe", "step": 0, "duration_s": 3600.0,
     "location": "/etc/passwd:1"},
    {"kind": "step", "t": now, "pid": pid, "step": 0, "duration_s": 0.01, "samples": 4},
]
s.sendall(b"".join(json.dumps(m).encode() + b"\\n" for m in msgs))
s.close()
time.sleep(0.5)
print("forged")
"""


def test_a_workload_forging_absurd_probe_messages_is_not_believed(tmp_path):
    home, run_dir = tmp_path / "home", tmp_path / "forged"
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                        "--run-dir", str(run_dir), "--", sys.executable, "-c", FORGER],
                       capture_output=True, text=True, cwd=REPO, env=base_env(home), timeout=120)
    assert p.returncode == 0, p.stderr
    s = json.loads((run_dir / "summary.json").read_text())
    assert s["steps"] == 1  # the one sane step
    assert s["compile_total_s"] in (0, 0.0, None) and s["compile_count"] == 0
    assert s["parse_problems"] >= 3
    assert any("out of range was refused" in n for n in s["notices"]), s["notices"]
    problems = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()
                if '"parse_problem"' in x]
    errors = " ".join(e["error"] for e in problems)
    assert "step 1000000000000000000000000000000" in errors and "data_wait_s -5.0" in errors
    assert "duration_s 3600.0" in errors
    listed = subprocess.run([sys.executable, "-m", "neurondesk.cli", "history", "--format", "json"],
                            capture_output=True, text=True, cwd=REPO, env=base_env(home), timeout=60)
    assert [r["id"] for r in json.loads(listed.stdout)] == [s["run_id"]], listed.stderr
