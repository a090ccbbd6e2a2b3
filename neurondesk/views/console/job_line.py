"""The job's lines under the header of a console given ``--prometheus URL``: which node holds the job
back, which is compiling, which failed (reports/job_text.py, the lines `fleet` says). ``read`` is wired by
the CLI to Prometheus (views never touch clients) and runs in a worker thread every ``every_s``, so a
slow Prometheus never freezes the console; an error is one line, the last lines kept above it."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static

ReadLines = Callable[[], list[str]]
EVERY_S = 5.0


class JobLine(Static):
    DEFAULT_CSS = "JobLine { height: auto; max-height: 4; padding: 0 1; color: $warning; }"

    def __init__(self, read: ReadLines, source: str, every_s: float = EVERY_S, **kw) -> None:
        super().__init__(f"job: asking Prometheus at {source} ...", **kw)
        self.read, self.every_s = read, every_s
        self.lines: list[str] = []
        self.refreshes = 0

    def on_mount(self) -> None:
        self._ask()
        self.set_interval(self.every_s, self._ask)

    def _ask(self) -> None:
        self.run_worker(self._read, thread=True, exclusive=True, group="job-line")

    def _read(self) -> None:
        try:
            lines, error = self.read(), None
        except Exception as exc:  # noqa: BLE001 - Prometheus down or refusing: say so, keep the last lines
            lines, error = self.lines, f"job: Prometheus not read ({exc})"
        self.app.call_from_thread(self._show, lines, error)

    def _show(self, lines: list[str], error: str | None) -> None:
        self.lines = lines
        self.refreshes += error is None
        shown = lines[:3] + ([error] if error else [])
        self.update(Text("\n".join(shown) if shown else "job: no series of this job in Prometheus yet"))
