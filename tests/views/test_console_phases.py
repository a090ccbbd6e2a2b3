"""The step phases in the console (issue 36 item 1): the real Textual app under App.run_test() on a
replayed journal whose steps carry phases_s (an input-bound eager loop: 41% of each 100 ms step
waits for the DataLoader, 4 workers, the host's CPU at 35%). The Throughput panel shows the steady
split as a stacked bar with its legend and the verdict's words, and the recent steps as stacked
columns; the Overview says the verdict and the largest phases. The values are core's (RunFigures)."""

from __future__ import annotations

import asyncio

import pytest

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.sources.replay import ReplaySource
from neurondesk.store.journal import JournalWriter
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line

# the console under the newest Textual too (make test-latest)
pytestmark = pytest.mark.latest

PID, STEPS, WARMUP = 4242, 30, 5
PHASES = [0.0, 0.02, 0.015, 0.01, 0.0, 0.0]  # h2d, forward, backward, optimizer, sync, collective
WAIT = 0.041  # of a 0.1 s step; other: 0.014


def journal(run) -> None:
    run.mkdir()
    workers = [dev.ProcessInfo(pid=PID + 1 + i, ppid=PID, name="pt_data_worker", role="dataloader", cpu_percent=30.0)
               for i in range(4)]
    main = dev.ProcessInfo(pid=PID, ppid=1, name="python", role="main", cpu_percent=95.0)
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="phases", command=["python", "train.py"], warmup_steps=WARMUP))
        w.write(dev.DeviceInventory(t=1.1, cpu=dev.CpuInfo(logical_cores=16)))
        for i in range(STEPS):
            t = 2.0 + 0.1 * i
            w.write(dev.ProcessTreeSample(t=t - 0.05, root_pid=PID, processes=[main, *workers],
                                          total_cpu_percent=215.0, dataloader_workers=4, dataloader_cpu_percent=120.0))
            w.write(dev.HostSample(t=t - 0.04, cpu_percent=35.0))
            w.write(ev.StepEnded(t=t, pid=PID, step=i, duration_s=0.1, data_wait_s=WAIT, samples=8, phases_s=PHASES))


def shown(run, size, keys=()):
    async def go():
        app = ConsoleApp(ReplaySource(run, speed=0), frozen=True)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            line = app.query_one("#step-phases", Line)
            return line.text, line.display, app.query_one("#overview-text", Line).text.plain, app.source.state
    return asyncio.run(go())


def test_the_throughput_panel_in_its_tab_shows_the_split_the_verdict_and_the_recent_steps(tmp_path):
    journal(tmp_path / "run")
    text, display, _, state = shown(tmp_path / "run", (80, 24), keys=("t",))
    p = run_figures(state).step_phases
    assert display and p is not None and p.verdict == "input-bound"
    plain = text.plain
    assert "input-bound" in plain and "shares of 25 steady steps" in plain
    for words in ("input wait 41.0% 41.0 ms", "forward 20.0% 20.0 ms", "backward 15.0% 15.0 ms",
                  "optimizer 10.0% 10.0 ms", "other 14.0% 14.0 ms"):
        assert words in plain, plain
    assert "collective" not in plain  # measured at 0: not in the legend
    assert p.words in plain.replace("\n", "")
    assert "try num_workers=8 (4 now, host CPU 35%)" in p.words
    lines = text.split("\n")
    bar = lines[1]
    assert set(bar.plain) == {"█"}
    orange = sum(s.end - s.start for s in bar.spans if str(s.style) == "dark_orange3")
    assert abs(orange - 0.41 * len(bar.plain)) <= 1  # the input wait's part of the bar

    # the recent steps as columns: 3 rows, each step 24 levels high; bottom row: the input wait
    # (the first phase, 41% of the step), middle: the forward, top: other (the last 14%)
    rows = [x for x in lines if x.plain.strip()][-3:]
    assert rows[0].plain.startswith("last steps")
    for row, style in zip(rows, ("grey50", "cyan", "dark_orange3"), strict=True):
        cols = [s for s in row.spans if s.start >= 12]
        assert cols and str(cols[-1].style) == style, (row.plain, row.spans)


def test_beside_the_charts_the_split_is_compact_four_lines_at_most_no_columns(tmp_path):
    journal(tmp_path / "run")
    text, display, _, state = shown(tmp_path / "run", (160, 48), keys=("escape",))
    lines = text.split("\n")
    assert display and len(lines) <= 4 and "last steps" not in text.plain
    head = lines[0]
    assert head.plain.startswith("phases ") and head.plain.rstrip().endswith("input-bound")
    cells = [s for s in head.spans if head.plain[s.start:s.end].strip("█") == ""]
    drawn = sum(s.end - s.start for s in cells)
    orange = sum(s.end - s.start for s in cells if str(s.style) == "dark_orange3")
    assert drawn > 40 and abs(orange - 0.41 * drawn) <= 1
    assert lines[1].plain.startswith("■ input wait 41.0%  ■ forward 20.0%")
    assert "try num_workers=8" in text.plain


def test_the_overview_tab_says_the_verdict_and_the_largest_phases(tmp_path):
    journal(tmp_path / "run")
    _, _, overview, _ = shown(tmp_path / "run", (80, 24))
    assert "Phases      input-bound input wait 41.0% · forward 20.0% · backward 15.0%" in overview


def test_no_phases_timed_leaves_the_panel_as_before(tmp_path):
    run = tmp_path / "plain"
    run.mkdir()
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="plain", command=["python", "train.py"], warmup_steps=2))
        for i in range(8):
            w.write(ev.StepEnded(t=2.0 + 0.1 * i, pid=PID, step=i, duration_s=0.1, data_wait_s=0.0))
    _, display, overview, _ = shown(run, (160, 48))
    assert not display and "Phases" not in overview
