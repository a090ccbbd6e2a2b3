"""The console (App.run_test + Pilot) on replays of runs recorded with the real XLA CPU backend
(tests/data/journals/, made by `scripts/make_screenshots.py --record`), and ReplaySource itself."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from conftest import DATA, REPO
from textual.widgets import DataTable, Tabs

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import OUTPUT_KEEP
from neurondesk.reports import fmt
from neurondesk.sources.replay import ReplaySource
from neurondesk.store.journal import JournalWriter, read_journal
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.compiles import CompilesPanel
from neurondesk.views.console.log import MAX_LINES, LogPanel, LogView
from neurondesk.views.console.panel import Line
from neurondesk.views.console.screens import HelpScreen, SummaryScreen

# the console under the newest Textual too (make test-latest)
pytestmark = pytest.mark.latest

JOURNALS = DATA / "journals"
WIDE, SMALL = (160, 48), (80, 24)


def run_app(source, size, script, frozen=True, poll_s=0.25):
    """Run the app headless at `size`, await `script(app, pilot)`, return what it returns."""

    async def go():
        app = ConsoleApp(source, frozen=frozen, poll_s=poll_s)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return await script(app, pilot)

    return asyncio.run(go())


def text(app, selector: str) -> str:
    return app.query_one(selector, Line).text.plain


def recorded(name: str) -> list:
    events, problems = read_journal(JOURNALS / name / "events.jsonl")
    assert not problems
    return events


def first_compile_offset(name: str, into: float) -> float:
    events = recorded(name)
    started = next(e for e in events if e.kind == "compile_started")
    return started.t - events[0].t + into


# ---------------------------------------------------------------------------- ReplaySource
class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_replay_releases_events_by_recorded_time_times_speed():
    clock = FakeClock()
    src = ReplaySource(JOURNALS / "plain", speed=4.0, clock=clock)
    events = recorded("plain")
    offsets = [e.t - events[0].t for e in events]
    assert src.poll() == sum(1 for o in offsets if o <= 0)
    clock.t += 2.5  # 2.5 s of wall time at x4 = 10 s of the recording
    src.poll()
    assert src.applied == sum(1 for o in offsets if o <= 10.0)
    assert src.now() == pytest.approx(src.t0 + 10.0)
    assert not src.done
    clock.t += 1000
    src.poll()
    assert src.done and src.state.finished
    assert src.now() == pytest.approx(events[-1].t)
    assert src.applied == len(events)


def test_instant_replay_state_matches_the_journal_counted_by_hand():
    src = ReplaySource(JOURNALS / "plain", speed=0)
    src.poll()
    assert src.done
    # the journal read as plain JSON lines, without the reducer
    raw = [json.loads(line) for line in (JOURNALS / "plain" / "events.jsonl").read_text().splitlines() if line]
    steps = [e for e in raw if e["kind"] == "step"]
    assert src.state.event_count == len(raw) == 215
    assert src.state.steps_done == len(steps) == 120
    # steady = after the 5 warm-up steps (default --warmup-steps) and after the last step that compiled
    last_compile = max(e["step"] for e in steps if e["compiles"])
    steady = [e for e in steps if e["step"] >= max(5, last_compile + 1)]
    # the one steady basis (docs/steady-state.md): a steady step's mean samples over the mean steady step,
    # the steady samples over the steady time
    expected = sum(e["samples"] for e in steady) / sum(e["duration_s"] for e in steady)
    assert src.state.steady_samples_per_s == pytest.approx(expected, rel=1e-9)


def test_replay_reads_the_journal_as_it_goes_and_skips_bad_lines(tmp_path):
    run = tmp_path / "torn"
    run.mkdir()
    lines = (JOURNALS / "item" / "events.jsonl").read_bytes().splitlines(keepends=True)
    (run / "events.jsonl").write_bytes(b"".join(lines[:10]) + b"{not json\n" + b"".join(lines[10:]) + b'{"t": 1')
    src = ReplaySource(run, speed=0)
    src.poll()
    assert src.done and src.applied == len(lines)
    assert [p.line for p in src.problems] == [11, len(lines) + 2]
    assert "torn last line" in src.problems[-1].error


def test_replay_until_stops_mid_run_and_a_missing_folder_says_what_to_give(tmp_path):
    src = ReplaySource(JOURNALS / "plain", speed=0, until=first_compile_offset("plain", 3.0))
    src.poll()
    assert not src.done and src.state.open_compile_since() is not None
    with pytest.raises(FileNotFoundError, match="neurondesk run"):
        ReplaySource(tmp_path / "nope")


# ---------------------------------------------------------------------------- panels, wide
def test_compile_wall_in_progress_shows_a_live_timer():
    until = first_compile_offset("plain", 4.0)

    async def script(app, pilot):
        return text(app, "#header"), text(app, "#compile-stats")

    header, stats = run_app(ReplaySource(JOURNALS / "plain", speed=0, until=until), WIDE, script)
    assert "compiling #1 — 0:04 and counting" in header
    assert "compiling #1 — 0:04 and counting" in stats
    assert "step 0 / 120" in header


def test_finished_run_opens_the_summary_and_keeps_it_until_quit():
    async def script(app, pilot):
        assert isinstance(app.screen, SummaryScreen)
        s = app.screen.summary
        await pilot.pause(0.6)  # more ticks: the console stays on the summary
        assert isinstance(app.screen, SummaryScreen)
        await pilot.press("escape")  # back to the panels, frozen at the end
        assert not isinstance(app.screen, SummaryScreen)
        header = text(app, "#header")
        await pilot.press("q")
        await pilot.pause()
        return s, header, app.return_code

    s, header, code = run_app(ReplaySource(JOURNALS / "plain", speed=0), WIDE, script)
    assert s.finished and s.exit_code == 0 and s.steps == 120
    assert "finished (exit 0)" in header
    assert code == 0


def test_compile_table_and_detail_of_the_selected_row():
    async def script(app, pilot):
        await pilot.press("escape", "c")
        table = app.query_one("#compile-table", DataTable)
        assert table.has_focus
        rows = table.row_count
        await pilot.press("ctrl+home")
        await pilot.pause()
        first = text(app, "#compile-detail")
        await pilot.press("ctrl+end")
        await pilot.pause()
        last = text(app, "#compile-detail")
        late = [table.get_row_at(i) for i in range(rows)]
        return rows, first, last, late, app.source.state, text(app, "#compile-stats")

    rows, first, last, late_rows, state, stats = run_app(ReplaySource(JOURNALS / "dynamic", speed=0), WIDE,
                                                         script)
    assert rows == len(state.compiles) > 5
    assert "compile #1" in first and "first" in first
    c = state.compiles[-1]
    assert f"compile #{c.index}" in last and c.cause == "shape-change"
    assert "→" in last  # previous shapes → these shapes
    assert c.graph_hash in last
    assert "after warm-up" in last
    marked = [r for r in late_rows if "⚠" in r[2].plain]
    assert len(marked) == state.recompiles_after_warmup > 0
    assert f"{state.recompiles_after_warmup} after warm-up" in stats


def test_split_point_when_a_step_runs_several_graphs():
    async def script(app, pilot):
        await pilot.press("escape")
        return text(app, "#compile-stats")

    stats = run_app(ReplaySource(JOURNALS / "item", speed=0), WIDE, script)
    assert "graphs per step: 2" in stats
    assert "split by value-access at train.py:" in stats


def test_input_bound_run_says_so_in_the_header_and_the_input_panel():
    events = recorded("input_bound")
    mid = next(e.t for e in events if e.kind == "step" and e.step == 50) - events[0].t

    async def script(app, pilot):
        return text(app, "#header"), text(app, "#input-text"), text(app, "#devices-text")

    header, inputs, devices = run_app(ReplaySource(JOURNALS / "input_bound", speed=0, until=mid), WIDE, script)
    assert "input-bound" in header
    assert "input-bound" in inputs and "DataLoader workers 1" in inputs and "dataloader" in inputs
    assert "host CPU per core" in devices and "cpu0" in devices


def test_throughput_and_cost_panels_render_the_reducers_figures():
    async def script(app, pilot):
        await pilot.press("escape")
        return text(app, "#throughput-text"), text(app, "#cost-text"), app.source.state

    thr, cost, state = run_app(ReplaySource(JOURNALS / "plain", speed=0), WIDE, script)
    assert f"{state.steady_step_time_s * 1000:,.1f} ms/step" in thr
    assert fmt.rate(state.steady_samples_per_s) in thr
    assert f"mean of {len(state.steady_times)} steps from step {state.steady_from}" in thr
    assert "$/1k steps steady" in cost and "$/1M tokens" in cost and "projected 120 " in cost
    assert "trn1.2xlarge" in cost


# ---------------------------------------------------------------------------- small terminal
def test_80x24_folds_panels_into_tabs_and_keys_switch_them():
    async def script(app, pilot):
        await pilot.press("escape")
        assert app.tabbed
        tabs = app.query_one(Tabs)
        assert tabs.display and tabs.active == "tab-overview"
        overview = text(app, "#overview-text")
        await pilot.press("c")
        await pilot.pause()
        compiles_visible = app.query_one("#compiles", CompilesPanel).display
        log_visible = app.query_one("#log", LogPanel).display
        await pilot.press("l")
        await pilot.pause()
        return overview, compiles_visible, log_visible, tabs.active, app.query_one("#log", LogPanel).display

    overview, comp, log_before, active, log_after = run_app(ReplaySource(JOURNALS / "plain", speed=0),
                                                            SMALL, script)
    for label in ("Compiles", "Throughput", "Input", "Cost", "Devices"):
        assert label in overview
    assert comp and not log_before
    assert active == "tab-log" and log_after


@pytest.mark.slow  # seconds of waiting: make test runs it, make test-fast does not
def test_help_and_summary_keys():
    async def script(app, pilot):
        await pilot.press("escape", "question_mark")
        helped = isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "f")
        return helped, isinstance(app.screen, SummaryScreen)

    assert run_app(ReplaySource(JOURNALS / "item", speed=0), WIDE, script) == (True, True)


# ---------------------------------------------------------------------------- log
@pytest.mark.slow  # seconds of waiting: make test runs it, make test-fast does not
def test_log_is_searchable_and_tinted():
    async def script(app, pilot):
        await pilot.press("escape", "slash")
        await pilot.press(*"loss 5.", "enter")
        await pilot.pause()
        log = app.query_one("#log-lines", LogView)
        filtered = [line.plain for line in log.lines]
        subtitle = app.query_one("#log", LogPanel).border_subtitle
        await pilot.press("slash", "escape")
        await pilot.pause()
        return filtered, subtitle, len(log.lines), app.source.state

    filtered, subtitle, after, state = run_app(ReplaySource(JOURNALS / "plain", speed=0), WIDE, script)
    assert filtered and all("loss 5." in line for line in filtered)
    assert f"{len(filtered)} lines" in subtitle
    assert after == len(state.output)


def test_log_styles_by_tag():
    from neurondesk.views.console.log import styled

    err = styled(ev.OutputLine(t=0, stream="stderr", text="Traceback", tag="error"))
    assert any("red" in str(s.style) for s in err.spans)
    noise = styled(ev.OutputLine(t=0, stream="stdout", text="x", tag="noise"))
    assert any("dim" in str(s.style) for s in noise.spans)


def test_log_and_state_stay_bounded_through_a_flood_of_output(tmp_path):
    run = tmp_path / "flood"
    run.mkdir()
    n = OUTPUT_KEEP * 3
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="flood", command=["python", "x.py"]))
        for i in range(n):
            w.write(ev.OutputLine(t=1.0 + i * 1e-4, stream="stdout", text=f"line {i}"))

    async def script(app, pilot):
        await pilot.press("l")
        for _ in range(3):
            app.poll_now()
        await pilot.pause()
        return len(app.query_one("#log-lines", LogView).lines), app.source.state

    lines, state = run_app(ReplaySource(run, speed=0), WIDE, script)
    assert state.output_total == n
    assert len(state.output) == OUTPUT_KEEP
    assert lines <= MAX_LINES


def test_one_render_per_poll_however_many_events_arrived(tmp_path):
    run = tmp_path / "burst"
    run.mkdir()
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="burst", command=["python", "x.py"], steps_requested=5000))
        for i in range(5000):
            w.write(ev.StepEnded(t=2.0 + i * 0.001, pid=1, step=i, duration_s=0.02, samples=8))
    clock = FakeClock()

    async def script(app, pilot):
        calls = []
        panel = app.query_one("#input")
        original = panel.render_view
        panel.render_view = lambda v: (calls.append(v.figures.steps), original(v))[1]
        clock.t += 100  # every step is due at once
        app.poll_now()
        app.poll_now()  # nothing new: nothing to render
        return calls

    calls = run_app(ReplaySource(run, speed=1.0, clock=clock), WIDE, script, poll_s=3600)
    assert calls == [5000]


# ---------------------------------------------------------------------------- keys on a replay
def test_export_on_a_replay_writes_next_to_the_journal_and_stop_explains(tmp_path):
    run = tmp_path / "item"
    shutil.copytree(JOURNALS / "item", run)

    async def script(app, pilot):
        await pilot.press("escape", "e", "s")
        await pilot.pause()
        return [n.message for n in app._notifications]

    notes = run_app(ReplaySource(run, speed=0), WIDE, script)
    out = run / "replay-summary.json"
    assert out.exists() and json.loads(out.read_text())["steps"] == 40
    assert (run / "replay-summary.md").exists()
    assert any(str(out) in n for n in notes)
    assert any("no workload to stop" in n for n in notes)


def test_cli_replay_rejects_a_bad_speed_and_a_missing_folder(tmp_path, capsys, monkeypatch):
    from neurondesk.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["replay", str(tmp_path), "--speed", "-1"])
    assert e.value.code == 2
    assert "--speed -1" in capsys.readouterr().err

    monkeypatch.setattr("sys.stdout.isatty", lambda: True)  # past the terminal check, to the folder
    with pytest.raises(SystemExit) as e:
        main(["replay", str(tmp_path / "nope")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "nope") in err and "neurondesk run" in err


def test_cli_replay_speed_and_until_reach_the_replay(monkeypatch):
    """`replay --speed/--until` from the command line: the console is stood in for (it needs a
    terminal); the source it is given plays the journal at that speed and stops at that offset."""
    import neurondesk.views.console.app as console_app
    from neurondesk.cli.main import main

    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    given = []

    def fake_run_replay(source):
        given.append(source)
        return 0

    monkeypatch.setattr(console_app, "run_replay", fake_run_replay)
    until = first_compile_offset("plain", 3.0)
    assert main(["replay", str(JOURNALS / "plain"), "--speed", "4", "--until", str(until)]) == 0
    (src,) = given
    assert src.speed == 4.0 and src.until == pytest.approx(until)
    src.speed = 0  # play the rest at once: it stops at --until, in the first compile
    src.poll()
    assert not src.done and src.state.open_compile_since() is not None
    assert src.state.steps_done == 0

    given.clear()
    assert main(["replay", str(JOURNALS / "plain"), "--instant"]) == 0
    assert given[0].speed == 0


def test_compile_table_keeps_the_latest_rows_and_counts_them_all(tmp_path):
    from neurondesk.views.console.compiles import TABLE_ROWS

    run = tmp_path / "many"
    run.mkdir()
    n = TABLE_ROWS + 100
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="many", command=["python", "x.py"]))
        for i in range(n):
            w.write(ev.CompileFinished(t=2.0 + i, source="probe", duration_s=0.5, pid=1, step=i,
                                       point="p", location="x.py:1", input_shapes=[[8, i + 1]]))

    async def script(app, pilot):
        await pilot.press("c")
        table = app.query_one("#compile-table", DataTable)
        return table.row_count, table.get_row_at(0)[0].plain, text(app, "#compile-stats")

    rows, first_index, stats = run_app(ReplaySource(run, speed=0), WIDE, script)
    assert rows == TABLE_ROWS
    assert first_index == str(n - TABLE_ROWS + 1)
    assert f"compiles {n}" in stats


def test_keys_are_in_the_command_palette_too():
    async def script(app, pilot):
        return [c.title for c in app.get_system_commands(app.screen)]

    titles = run_app(ReplaySource(JOURNALS / "item", speed=0, until=1.0), WIDE, script)
    for title in ("Quit", "Stop the workload", "Export the summary", "Show Compiles", "Show Log", "Help"):
        assert title in titles


@pytest.mark.parametrize("kind", ["neuron", "gpu"])
def test_devices_show_neuron_cores_or_gpus_when_they_are_sampled(tmp_path, kind):
    from neurondesk.core.events import device_events as dev

    run = tmp_path / kind
    run.mkdir()
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id=kind, command=["python", "x.py"]))
        w.write(dev.HostSample(t=1.5, cpu_percent=10.0, per_cpu_percent=[10.0] * 4, memory_total=64 << 30,
                               memory_used=8 << 30))
        if kind == "neuron":
            w.write(dev.NeuronSample(t=2.0, cores=[
                dev.NeuronCoreSample(core=i, utilization=50.0 + i, memory={"tensors": 1 << 30}, memory_total=1 << 30)
                for i in range(32)],  # capacity: device memory / cores (memory_total is the memory in use)
                hardware_info=dev.NeuronHardware(device_count=16, device_memory_bytes=32 << 30, cores_per_device=2)))
        else:
            w.write(dev.GpuSample(t=2.0, gpus=[
                dev.GpuReading(index=i, name="H100", util_gpu=90.0, memory_used=40 << 30, memory_total=80 << 30)
                for i in range(2)]))

    async def script(app, pilot):
        return text(app, "#devices-text")

    shown = run_app(ReplaySource(run, speed=0), WIDE, script)
    assert "host CPU per core" not in shown
    if kind == "neuron":
        assert "32 NeuronCores" in shown and "nc31" in shown and "81%" in shown
        assert "device memory 32.0/512G over 32 NeuronCores" in shown
    else:
        assert "2 GPUs" in shown and "gpu1" in shown and "40.0/80G" in shown
    assert "8.0 GiB / 64.0 GiB host" in shown


def test_the_console_never_imports_torch():
    import subprocess
    import sys

    code = ("import sys, neurondesk.cli.main, neurondesk.recorder.recorder, neurondesk.sources.follow, "
            "neurondesk.views.console.app; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.strip() == "False"


def test_devices_show_the_compile_cache_and_collector_trouble(tmp_path):
    from neurondesk.core.events import device_events as dev

    run = tmp_path / "cache"
    run.mkdir()
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="cache", command=["python", "x.py"]))
        w.write(dev.NeuronSample(t=1.5, cores=[dev.NeuronCoreSample(core=0, utilization=40.0, owner_pid=9)]))
        w.write(dev.CacheScan(t=2.0, path="/var/tmp/neuron-compile-cache", exists=True, size_bytes=3 << 30,
                              entries={"done": 12, "failed": 1, "locked": 0, "empty": 0},
                              free_bytes=5 << 30, disk_total_bytes=100 << 30,
                              warnings=["compile cache disk has 5% free (under 10%)"]))
        w.write(ev.Notice(t=3.0, level="warn", source="neuron-monitor",
                          message="neuron-monitor exited with status 1; restarting in 2 s"))

    async def script(app, pilot):
        return text(app, "#devices-text")

    shown = run_app(ReplaySource(run, speed=0), WIDE, script)
    assert "compile cache 3.0 GiB, 12 done, 1 failed, 5% disk free · /var/tmp/" in shown
    assert "5% free (under 10%)" in shown
    assert "neuron-monitor: neuron-monitor exited with status 1; restarting in 2 s" in shown
