"""Alerts, the hang and the budget in real runs of the bundled workload (plain torch on the CPU:
the rules do not depend on the device), with a real loopback webhook."""

from __future__ import annotations

from conftest import REPO, neurondesk_run
from test_notify_webhook import SECRET, Hook

LONG_EVAL = REPO / "tests" / "data" / "workloads" / "long_eval.py"


def test_a_hang_its_end_the_budget_and_the_finish_are_posted_rung_and_journaled(tmp_path):
    hook = Hook()
    try:
        # $360/h = $0.1/s: 80% of a $0.5 budget after 4 s; the workload stands 6 s at step 8
        run = neurondesk_run(tmp_path, ["--preset", "demo", "--device", "cpu", "--steps", "14", "--hang-at-step", "8", "--hang-s", "6"],
                             ["--price-per-hour", "360", "--budget-usd", "0.5", "--hang-after", "2",
                              "--notify", "--notify-url", hook.url, "--notify-compile-s", "0"])
    finally:
        hook.close()
    assert run.returncode == 0, run.stderr[-2000:]
    events = [b["event"] for b in hook.bodies]
    assert "hung" in events and "resumed" in events and events.index("hung") < events.index("resumed")
    assert "budget_warn" in events and "budget_reached" in events
    assert events[-1] == "finished"
    hung = hook.bodies[events.index("hung")]
    assert hung["message"].startswith("hung at step 7 for") and hung["figures"]["threshold_s"] == 2.0
    assert hung["text"].startswith(f"neurondesk {run.summary['run_id']}: hung at step 7")
    # every alert is a notice in the journal (a replay tells it too), and a line on the viewer's stderr
    journaled = [e["message"] for e in run.events if e["kind"] == "notice" and e.get("source") == "alert"]
    assert [b["message"] for b in hook.bodies] == journaled
    assert "neurondesk: alert: hung at step 7" in run.stderr
    assert "\x1b]777;notify;" not in run.stderr  # stderr is not a terminal: no escape sequences
    started = next(e for e in run.events if e["kind"] == "run_started")
    assert (started["budget_usd"], started["hang_after_s"]) == (0.5, 2.0)
    # the webhook's secret is nowhere in the run folder or the output
    for path in run.run_dir.rglob("*"):
        if path.is_file():
            assert b"s3cr3t" not in path.read_bytes(), path
    assert SECRET not in run.stderr + run.stdout


def test_budget_stop_stops_the_workload_as_s_does(tmp_path):
    run = neurondesk_run(tmp_path, ["--preset", "demo", "--device", "cpu", "--steps", "100000"],
                         ["--price-per-hour", "360", "--budget-usd", "1.0", "--budget-stop"], timeout=120)
    s = run.summary
    assert s["steps"] < 100000 and s["exit_code"] != 0
    notices = [e["message"] for e in run.events if e["kind"] == "notice" and e.get("source") == "alert"]
    assert any(m.startswith("budget reached: $1.") for m in notices), notices
    assert any("stopping the workload (--budget-stop)" in m for m in notices)
    assert not any(m.startswith("finished") for m in notices)  # no --notify: only hang and budget are said


def test_budget_stop_needs_a_budget(tmp_path):
    run = neurondesk_run(tmp_path, ["--preset", "demo", "--device", "cpu", "--steps", "3"], ["--budget-stop"])
    assert run.returncode == 2 and run.stderr.strip() == "neurondesk: --budget-stop needs --budget-usd X (the budget to stop at)"


def test_a_failed_check_and_a_failed_run_are_alerts(tmp_path):
    run = neurondesk_run(tmp_path, ["--preset", "demo", "--device", "cpu", "--steps", "12", "--crash-at-step", "9"],
                         ["--notify", "--min-samples-per-s", "1e12"])
    assert run.returncode == 1  # the workload's own failure outranks the failed check
    said = [e["message"] for e in run.events if e["kind"] == "notice" and e.get("source") == "alert"]
    failed = next(m for m in said if m.startswith("failed (exit 1) at step 8"))
    assert "RuntimeError: crash requested at step 9" in failed
    check = next(m for m in said if m.startswith("check failed: "))
    assert check.startswith("check failed: ran 8 of 12 requested steps; steady samples/s ")
    assert check.endswith(" below min 1e+12")
    assert f"neurondesk: alert: {check}" in run.stderr


def test_a_long_evaluation_making_progress_is_not_a_hang(tmp_path):
    """Issue 34 item 6: an evaluation (forwards under no_grad, no training step) of 7 s under
    --hang-after 2: its forwards are progress (the probe's eval_progress, a second apart), so no
    hang is said; the evaluation phase itself is recorded as before."""
    run = neurondesk_run(tmp_path, ["7"], ["--hang-after", "2", "--notify"], workload=LONG_EVAL)
    assert run.returncode == 0, run.stderr[-2000:]
    kinds = [e["kind"] for e in run.events]
    assert kinds.count("eval_progress") >= 4  # the phase said it went on, about once a second
    alerts = [e["message"] for e in run.events if e["kind"] == "notice" and e.get("source") == "alert"]
    assert not [m for m in alerts if m.startswith("hung")], alerts
    assert "finished" in alerts[-1]
    assert run.summary["evaluation"]["phases"] == 1 and run.summary["steps"] == 8
