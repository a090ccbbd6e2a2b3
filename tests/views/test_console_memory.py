"""Memory that creeps in the console (issue 36 item 3): the real Textual app under App.run_test() on a
replayed journal of a 2-rank run whose rank 1 keeps 3 MiB a step (one step and one process-tree sample
a second, 90 s). The Devices panel and the Overview's Memory row say core's line (RunFigures.memory_creep);
a run whose ranks stay flat says nothing."""

from __future__ import annotations

import asyncio
import random

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

MiB = 1 << 20
PIDS = (500, 501)


def journal(run, leak: int) -> None:
    run.mkdir()
    r = random.Random(5)
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="creep", command=["torchrun", "train.py"], warmup_steps=3))
        for rank, pid in enumerate(PIDS):
            w.write(ev.ProcessAttached(t=1.5, pid=pid, rank=rank, argv=["train.py"]))
        for i in range(90):
            t = 2.0 + i
            for pid in PIDS:
                w.write(ev.StepEnded(t=t, pid=pid, step=i, duration_s=1.0, data_wait_s=0.0, samples=8))
            rss = [1500 * MiB + r.gauss(0, MiB), 1500 * MiB + leak * i + r.gauss(0, MiB)]
            procs = [dev.ProcessInfo(pid=pid, ppid=1, name="python", role="rank", rss=int(x))
                     for pid, x in zip(PIDS, rss, strict=True)]
            w.write(dev.ProcessTreeSample(t=t + 0.5, root_pid=1, processes=procs, total_rss=int(sum(rss))))
            w.write(dev.HostSample(t=t + 0.6, memory_total=64 << 30, memory_used=8 << 30, memory_available=56 << 30))


def shown(run, size, key: str):
    async def go():
        app = ConsoleApp(ReplaySource(run, speed=0), frozen=True)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.press(key)
            await pilot.pause()
            return (app.query_one("#devices-text", Line).text.plain, app.query_one("#overview-text", Line).text.plain,
                    app.source.state)
    return asyncio.run(go())


def test_the_devices_panel_and_the_overview_name_the_creeping_rank(tmp_path):
    journal(tmp_path / "run", leak=3 * MiB)
    devices, _, state = shown(tmp_path / "run", (160, 48), "d")
    creep = run_figures(state).memory_creep
    assert creep is not None and [x.rank for x in creep.leaks] == [1]
    head = "memory creeps: rank 1 host RSS +11 GiB an hour since step 4"
    assert creep.short.startswith(head + ", host memory used up in about")
    assert head in devices  # cut to the panel's width
    _, overview, _ = shown(tmp_path / "run", (80, 24), "o")
    assert f"Memory      {head}" in overview


def test_flat_ranks_say_nothing(tmp_path):
    journal(tmp_path / "run", leak=0)
    devices, _, state = shown(tmp_path / "run", (160, 48), "d")
    assert run_figures(state).memory_creep is None
    assert "memory creeps" not in devices
