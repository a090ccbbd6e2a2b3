"""A death in the console (core/findings/crash.py through RunFigures): the real Textual app under App.run_test() on a
replayed journal of a run killed at its cgroup's memory limit. The end-of-run screen's title says how it died
and what to try; the Overview has a Died row."""

from __future__ import annotations

import asyncio

import pytest

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.sources.replay import ReplaySource
from neurondesk.store.journal import JournalWriter
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line

# the console under the newest Textual too (make test-latest)
pytestmark = pytest.mark.latest

PID = 4242


def journal(run) -> None:
    run.mkdir()
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="oom", command=["python", "train.py"]))
        w.write(ev.ProcessAttached(t=1.1, pid=PID))
        for i in range(6):
            w.write(ev.StepEnded(t=2.0 + 0.1 * i, pid=PID, step=i, duration_s=0.1))
        w.write(dev.CgroupMemory(t=3.0, pid=PID, path="/job-7", version=2, limit_bytes=2 << 30, limit_path="/job-7",
                                 usage_bytes=1 << 20, peak_bytes=2 << 30, oom_kills=1, host_oom_kills=1, final=True))
        w.write(ev.RunFinished(t=3.0, exit_code=-9, signal="SIGKILL"))


def test_the_console_says_how_the_run_died(tmp_path):
    journal(tmp_path / "run")

    async def go():
        app = ConsoleApp(ReplaySource(tmp_path / "run", speed=0), frozen=True)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            title = app.screen.query_one("#summary-title").render()
            await pilot.press("escape")
            await pilot.pause()
            await pilot.pause()
            return str(title), app.query_one("#overview-text", Line).text.plain
    title, overview = asyncio.run(go())
    assert "died (oom-killer): at step 6, the workload was killed by the kernel's OOM killer" in title
    assert "2.0 GiB of its 2.0 GiB limit" in title and "try: give it more host memory" in title
    died = next(line for line in overview.splitlines() if line.startswith("Died"))
    assert "oom-killer: at step 6" in died
