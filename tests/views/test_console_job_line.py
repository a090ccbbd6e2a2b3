"""A console given `--prometheus` shows the job's lines under its header (views/console/job_line.py): the
lines `fleet` says for the same job (reports/job_text.py over core/job/job_view.py), refreshed from a worker
thread; Prometheus failing is one line, the last lines kept."""

from __future__ import annotations

import asyncio
import dataclasses

from conftest import DATA

from neurondesk.core.job.fleet import FleetRead, FleetRow, RankRow
from neurondesk.sources.replay import ReplaySource
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.job_line import JobLine
from neurondesk.views.fleet import read_job_lines

JOURNALS = DATA / "journals"


def a_job() -> FleetRead:
    rows = [FleetRow("j", f"trn-{i}", f"r{i}", step=100, step_time_s=0.3, samples_per_s=10.0, price_per_hour=21.5,
                     started_t=0.0, last_update_t=100.0) for i in range(2)]
    ranks = [RankRow("j", f"trn-{i // 2}", f"r{i // 2}", i, presync_s=0.1, step_time_s=0.3) for i in range(4)]
    ranks[3] = dataclasses.replace(ranks[3], presync_s=0.25)
    return FleetRead(rows, ranks, 100.0)


def test_the_console_shows_the_jobs_lines_and_keeps_them_when_prometheus_fails():
    calls = {"n": 0}

    def read() -> list[str]:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError("connection refused")
        return read_job_lines(a_job(), "j")

    async def go():
        app = ConsoleApp(ReplaySource(JOURNALS / "plain"), frozen=True, job_lines=(read, "http://prom:9090"))
        async with app.run_test(size=(160, 48)) as pilot:
            line = app.query_one("#job-line", JobLine)
            line.every_s = 0.2
            for _ in range(50):
                await pilot.pause(0.1)
                if line.refreshes:
                    break
            first = str(line.render())
            line._ask()
            for _ in range(50):
                await pilot.pause(0.1)
                if "not read" in str(line.render()):
                    break
            return first, str(line.render())

    first, after = asyncio.run(go())
    expected = read_job_lines(a_job(), "j")
    assert expected[1].startswith("node trn-1 (rank 3)") and expected[1] in first
    assert "job: Prometheus not read (connection refused)" in after and expected[1] in after


def test_without_prometheus_there_is_no_job_line():
    async def go():
        app = ConsoleApp(ReplaySource(JOURNALS / "plain"), frozen=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            return len(app.query(JobLine))

    assert asyncio.run(go()) == 0
