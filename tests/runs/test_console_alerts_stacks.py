"""The console (App.run_test) with --notify (an alert the recorder journaled becomes a toast; other
notices do not) and its `k` key on a real live run that stands still (the stacks of its process,
read through py-spy or the probe's dump, written into the run folder)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from conftest import DATA, REPO, TRAIN, base_env, wait_until
from test_hang_stacks import SLEEP_LINE

from neurondesk.sources.follow import FollowSource
from neurondesk.sources.replay import ReplaySource
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.terminal_notify import AlertBell

JOURNALS = DATA / "journals"


class Clock:
    t = 100.0

    def __call__(self) -> float:
        return self.t


def journal_with_notices(tmp_path: Path) -> Path:
    """The recorded plain run, with an alert and a disk notice journaled before its end."""
    run = tmp_path / "run"
    run.mkdir()
    lines = (JOURNALS / "plain" / "events.jsonl").read_text().splitlines()
    end = next(i for i, line in enumerate(lines) if '"kind":"run_finished"' in line)
    t = json.loads(lines[end])["t"] - 0.5
    extra = [json.dumps({"kind": "notice", "t": t, "level": "error", "source": "alert",
                         "message": "hung at step 120 for 12 min: no step for 12 min"}),
             json.dumps({"kind": "notice", "t": t, "level": "warn", "source": "disk", "message": "disk fills in 2 h"})]
    (run / "events.jsonl").write_text("\n".join(lines[:end] + extra + lines[end:]) + "\n")
    return run


def toasts(app) -> list[str]:
    return [n.message for n in app._notifications]


def replayed(run: Path, notify: bool) -> list[str]:
    clock = Clock()

    async def go():
        app = ConsoleApp(ReplaySource(run, speed=1.0, clock=clock), frozen=True)
        app.alert_bell = AlertBell() if notify else None  # as run_console sets it for --notify
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            clock.t += 10_000  # to the end of the recording: the notices arrive after the console opened
            app.poll_now()
            await pilot.pause()
            return toasts(app)

    return asyncio.run(go())


def test_notify_turns_each_new_alert_into_a_toast_and_nothing_else(tmp_path):
    run = journal_with_notices(tmp_path)
    said = replayed(run, notify=True)
    assert said.count("hung at step 120 for 12 min: no step for 12 min") == 1
    assert not [m for m in said if "disk fills" in m]
    assert not [m for m in replayed(run, notify=False) if "hung at step" in m]


def test_k_reads_the_stacks_of_a_live_run_into_its_folder(tmp_path):
    env = base_env(tmp_path)
    run_dir = tmp_path / "live"
    start = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--detach", "--run-dir", str(run_dir), "--",
                            sys.executable, str(TRAIN), "--preset", "demo", "--device", "cpu", "--steps", "6",
                            "--hang-at-step", "3", "--hang-s", "120"], capture_output=True, text=True, env=env,
                           cwd=REPO, timeout=120)
    assert start.returncode == 0, start.stderr
    source = FollowSource(run_dir, attached=True)
    try:
        wait_until(lambda: (source.poll() or True) and source.state.steps_done >= 2, 120, "two steps")

        async def go():
            app = ConsoleApp(source, poll_s=0.25)
            async with app.run_test(size=(160, 48)) as pilot:
                await pilot.pause()
                await pilot.press("k")
                for _ in range(240):
                    said = [m for m in toasts(app) if "stands at" in m]
                    if said:
                        return said
                    await pilot.pause(0.25)
                return toasts(app)

        said = asyncio.run(go())
    finally:
        source.stop()
        wait_until(lambda: (run_dir / "summary.json").exists(), 60, "the run to end")
    assert said and said[0].startswith(f"every rank stands at main at train.py:{SLEEP_LINE} (every stack: "), said
    (dump,) = run_dir.glob("stacks-*.txt")
    text = dump.read_text()
    assert "), from py-spy ====" in text or "), from faulthandler ====" in text
    assert f"train.py:{SLEEP_LINE}" in text or f'train.py", line {SLEEP_LINE}' in text


def test_the_cost_panel_says_when_the_budget_is_reached(tmp_path):
    run = tmp_path / "budget"
    run.mkdir()
    lines = (JOURNALS / "plain" / "events.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["kind"] == "run_started"
    first["budget_usd"] = 1.0  # as `run --budget-usd 1` journals it
    cut = next(i for i, line in enumerate(lines) if '"kind":"run_finished"' in line)  # still running
    (run / "events.jsonl").write_text("\n".join([json.dumps(first), *lines[1:cut]]) + "\n")
    source = ReplaySource(run, speed=0)

    async def go():
        app = ConsoleApp(source, frozen=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            return app.query_one("#cost-text").text.plain

    text = asyncio.run(go())
    from neurondesk.core.figures.run_figures import budget_for_state

    b = budget_for_state(source.state, source.now())
    assert b.reach_at_step is not None and b.level == "ok"
    assert f"budget              {b.words()}" in text
    assert f"reached at step {b.reach_at_step:,}, in about " in text


def test_the_bell_rings_each_alert_once_however_many_notices_come_between_two_polls():
    """Issue 34 item 8: alerts are kept apart and counted (state.alerts, alerts_total), not found
    again by the identity of the last notice seen: more notices than the state keeps between two
    polls push no alert out unrung, and a state reduced again (a checkpoint's copy) rings none twice."""
    import pickle

    from neurondesk.core.events import run_events as ev
    from neurondesk.core.reduce.log import NOTICES_KEEP
    from neurondesk.core.reduce.state import RunState
    from neurondesk.core.view.pulse import alerts_of

    def alert(t: float, words: str) -> ev.Notice:
        return ev.Notice(t=t, level="error", source="alert", message=words)

    state, bell = RunState(), AlertBell()
    state.apply(alert(1.0, "old"))
    assert bell.new_alerts(alerts_of(state)) == []  # the past is not rung
    state.apply(alert(2.0, "first"))
    for i in range(3 * NOTICES_KEEP):  # far more than the state keeps, an alert among the last ones
        state.apply(ev.Notice(t=3.0 + i, level="info", source="disk", message=f"note {i}"))
        if i == 3 * NOTICES_KEEP - 10:
            state.apply(alert(3.0 + i, "second"))
    assert bell.new_alerts(alerts_of(state)) == ["first", "second"]  # each new one once, none pushed out
    again = pickle.loads(pickle.dumps(state))  # the same run as a checkpoint gives it back
    assert bell.new_alerts(alerts_of(again)) == []
    again.apply(alert(9999.0, "third"))
    assert bell.new_alerts(alerts_of(again)) == ["third"]
    assert bell.new_alerts(alerts_of(again)) == []
