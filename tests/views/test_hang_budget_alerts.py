"""The hang rule, the budget figures and the alert rules on the states of recorded runs (the
journals in tests/data/journals are real XLA CPU runs), with the clock given by the test."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import DATA

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import decode_event_line
from neurondesk.core.figures.budget import budget_figures
from neurondesk.core.figures.run_figures import budget_for_state
from neurondesk.core.node.hang import HANG_MIN_S, HangWatch, detect_hang, hang_threshold_s
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.alert_rules import AlertRules, AlertSettings

JOURNALS = DATA / "journals"


def recorded(name: str, finished: bool = False, **started) -> RunState:
    """The state of a recorded run, cut before its end (a run still going) unless ``finished``;
    ``started``: fields of its RunStarted replaced (--hang-after, --budget-usd)."""
    state = RunState()
    for line in (JOURNALS / name / "events.jsonl").read_bytes().splitlines():
        e = decode_event_line(line)
        if isinstance(e, ev.RunStarted):
            e = dataclasses.replace(e, **started)
        if isinstance(e, ev.RunFinished) and not finished:
            break
        state.apply(e)
    return state


def test_a_run_is_hung_after_five_minutes_without_a_step_not_before():
    state = recorded("plain")
    last = state.parts.steps.last_step_end
    assert state.steady_step_time_s * 10 < HANG_MIN_S  # fast steps: the 5-minute floor applies
    assert detect_hang(state.progress(), last + HANG_MIN_S - 1) is None
    hang = detect_hang(state.progress(), last + 12 * 60)
    assert hang is not None and hang.step == state.steps_done == 120
    assert state.phase(last + 12 * 60) == ("hung", "hung at step 120 for 12 min")
    assert state.phase(last + 10)[0] == "running"


def test_the_threshold_is_ten_steady_medians_when_longer_and_hang_after_overrides():
    assert hang_threshold_s(60.0, None) == 600.0  # 1-minute steps: 10 minutes
    assert hang_threshold_s(0.01, None) == HANG_MIN_S
    assert hang_threshold_s(60.0, 5.0) == 5.0
    state = recorded("plain", hang_after_s=30.0)
    last = state.parts.steps.last_step_end
    assert detect_hang(state.progress(), last + 29) is None
    assert detect_hang(state.progress(), last + 31).words() == "hung at step 120 for 31 s"


def test_a_compile_in_progress_is_not_a_hang_and_a_finished_run_never_is():
    state = recorded("plain", hang_after_s=30.0)
    last = state.parts.steps.last_step_end
    state.apply(ev.CompileStarted(t=last + 1, source="probe", pid=state.lead_pid, step=120))
    assert detect_hang(state.progress(), last + 3600) is None
    assert state.phase(last + 3600)[0] == "compiling"
    done = recorded("plain", finished=True, hang_after_s=30.0)
    assert detect_hang(done.progress(), done.last_t + 3600) is None


def test_no_step_yet_is_not_called_a_hang():
    state = RunState()
    state.apply(ev.RunStarted(t=100.0, run_id="r", command=["x"], hang_after_s=5.0))
    assert detect_hang(state.progress(), 10_000.0) is None


def test_the_hang_watch_says_a_hang_once_and_its_end_once():
    state = recorded("plain", hang_after_s=30.0)
    last = state.parts.steps.last_step_end
    watch = HangWatch()
    assert watch.check(state.progress(), last + 10) is None
    what, hang = watch.check(state.progress(), last + 40)
    assert what == "hung" and hang.step == 120
    assert watch.check(state.progress(), last + 80) is None  # the same episode
    state.apply(ev.StepEnded(t=last + 90, pid=state.lead_pid, step=120, duration_s=0.01))
    assert watch.check(state.progress(), last + 91) == ("resumed", pytest.approx(90.0))
    assert watch.check(state.progress(), last + 92) is None


def test_budget_figures_spent_share_and_when_it_is_reached():
    # $3.60/h = $0.001/s; 1,000 s in, 0.5 s steps: $1 of $2 spent, the rest in 1,000 s = 2,000 steps
    b = budget_figures(2.0, 3.6, 1000.0, 500, 0.5)
    assert (b.level, b.fraction, b.reach_in_s, b.reach_at_step) == ("ok", pytest.approx(0.5), pytest.approx(1000.0), 2500)
    assert b.words() == "$1.00 of $2.00 (50%); reached at step 2,500, in about 16 min"
    assert budget_figures(2.0, 3.6, 1600.0, 800, 0.5).level == "warn"  # 80%
    reached = budget_figures(2.0, 3.6, 2000.0, 1000, 0.5)
    assert reached.level == "reached" and reached.reach_in_s is None and reached.words().endswith("budget reached")
    unpriced = budget_figures(2.0, None, 1000.0, 500, 0.5)
    assert unpriced.level == "unpriced" and "no price" in unpriced.words()
    assert budget_figures(2.0, 3.6, 10.0, 0, None).reach_at_step is None  # no steady step: no step figure


def test_budget_of_a_recorded_run_reads_its_price_and_steady_pace():
    state = recorded("plain", budget_usd=1.0)
    now = state.last_t
    b = budget_for_state(state, now)
    price = state.price_per_hour
    assert b.spent_usd == pytest.approx(price / 3600 * state.elapsed_s(now))
    per_step = state.steady_step_time_s
    assert b.reach_at_step == state.steps_done + int((1.0 - b.spent_usd) / (price / 3600) / per_step)
    assert budget_for_state(recorded("plain"), now) is None  # no --budget-usd


def test_alert_rules_compile_walls_input_bound_hang_and_budget_each_once():
    state = recorded("input_bound", hang_after_s=60.0, budget_usd=0.001)
    rules = AlertRules(AlertSettings(compile_wall_s=0.0, input_bound_s=1.0))
    t = state.last_t
    first = rules.check(state, t)
    events = [a.event for a in first]
    assert events.count("compile_wall") == len(state.compiles) >= 1
    assert "budget_reached" in events and "budget_warn" not in events  # straight past 100%: said once
    assert all(a.figures.get("compile_s") is not None for a in first if a.event == "compile_wall")
    second = [a.event for a in rules.check(state, t + 2)]
    assert second == ["input_bound"]  # input-bound for over input_bound_s since the first look
    later = [a.event for a in rules.check(state, state.parts.steps.last_step_end + 61)]
    assert later == ["hung"]
    assert rules.check(state, state.parts.steps.last_step_end + 62) == []


def test_alerts_at_the_end_say_finished_or_failed_with_the_rank_and_the_checks():
    rules = AlertRules()
    done = recorded("plain", finished=True)
    (finished,) = rules.at_end(done, done.last_t, [])
    assert finished.event == "finished" and finished.message.startswith("finished: 120 steps in")
    failed = RunState()
    failed.apply(ev.RunStarted(t=1.0, run_id="r", command=["x"]))
    failed.apply(ev.ProcessAttached(t=1.5, pid=11, rank=1, world_size=2))
    failed.apply(ev.ProcessFailed(t=2.0, pid=11, error="RuntimeError: boom", step=7))
    failed.apply(ev.RunFinished(t=3.0, exit_code=1))
    alerts = rules.at_end(failed, 3.0, ["ran 7 of 10 requested steps"])
    assert [a.event for a in alerts] == ["failed", "check_failed"]
    assert "rank 1 failed first at step 7: RuntimeError: boom" in alerts[0].message
    assert alerts[0].figures["failed_rank"] == 1 and alerts[0].figures["exit_code"] == 1
    assert rules.at_end(recorded("plain"), 1.0, []) == []  # not finished: the recorder alone stopped


def test_the_metrics_phase_of_a_hung_run_is_hung():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from neurondesk.exporter.endpoint import RunCollector
    from neurondesk.exporter.snapshot import Snapshotter

    state = recorded("plain", hang_after_s=30.0)
    phases = {}
    for now in (state.parts.steps.last_step_end + 1, state.parts.steps.last_step_end + 60):
        collector = RunCollector()
        collector.snapshot = Snapshotter("job", "node").take(state, now)
        registry = CollectorRegistry()
        registry.register(collector)
        families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
        phases[now] = {s.labels["phase"]: s.value for s in families["neurondesk_phase"].samples}
    running, hung = phases.values()
    assert running["running"] == 1 and running["hung"] == 0
    assert hung["hung"] == 1 and sum(hung.values()) == 1


def test_progress_of_any_phase_is_progress_an_open_evaluation_or_the_scripts_own_bar():
    """Issue 34 item 6: an open evaluation's EvalProgress and a progress line the script printed
    move the hang rule's clock as a step does; when they stop, the hang is measured from the last."""
    state = recorded("plain", hang_after_s=30.0)
    last = state.parts.steps.last_step_end
    assert detect_hang(state.progress(), last + 40) is not None  # nothing since the last step
    state.apply(ev.EvalProgress(t=last + 20, pid=state.parts.procs.lead_pid or 1, step=120, batches=400, duration_s=20))
    assert detect_hang(state.progress(), last + 40) is None
    state.apply(ev.ThroughputReported(t=last + 45, value=9.5, unit="steps/s", line="Evaluating: 40%| 400/1000 [9.5it/s]"))
    assert detect_hang(state.progress(), last + 70) is None
    hang = detect_hang(state.progress(), last + 80)
    assert hang is not None and hang.since_t == last + 45
