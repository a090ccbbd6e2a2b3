"""The recorder's sinks (``--tensorboard``, ``--mlflow``, ``--wandb``): frames taken by the recorder's
own thread (it owns the state), a frame a second, each offered to every sink's runner without waiting
(sinks/base.py). What a sink says while the run goes comes back through the recorder's queue as a
notice; at the end each gets the last frame, the run's params and tags and the summary files, within
a bounded wait, and what each wrote or did not is journaled before the journal closes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.types import Summary
from neurondesk.recorder.options import RunOptions
from neurondesk.reports.summary_writer import to_json, to_markdown
from neurondesk.sinks.base import SinkError, SinkRunner
from neurondesk.sinks.choose import make_sinks
from neurondesk.sinks.frames import FRAME_EVERY_S, FrameTaker, run_info

CLOSE_WAIT_S = 20.0  # at the end of the run, all sinks together
TITLES = {"tensorboard": "TensorBoard", "mlflow": "MLflow", "wandb": "W&B"}
FINISHING = "finishing"  # the source of the notice that names the sinks being finished (views/headless.py)


def report_html(state: RunState, run_dir: Path, summary: Summary | None = None) -> str:
    """report.html of the run: ``summary`` is the one the recorder built at the end (None: built here, as
    cli_sinks.py's export still asks it)."""
    from neurondesk.core.summary.build import run_summary
    from neurondesk.core.view.read_views import step_chart
    from neurondesk.reports.html_report import ReportRun, render

    run = ReportRun(summary if summary is not None else run_summary(state), step_chart(state, points=600),
                    list(state.loss_history), str(run_dir))
    return render([run], None)


class SinkDesk:
    """No sink asked for: every call does nothing."""

    def __init__(self, options: RunOptions, put: Callable[[ev.Event], None]) -> None:
        self.options, self._put = options, put
        self.runners: list[SinkRunner] = []
        self.taker = FrameTaker()
        self._next_t = 0.0
        self._started = False

    def _say(self, words: str) -> None:  # from a sink's thread: through the recorder's queue
        self._put(ev.Notice(t=time.time(), level="warn", source="sinks", message=words))

    def _start(self, state: RunState, run_dir: Path) -> None:
        """At the first poll: the workload and telemetry started (a sink may set variables in this process)."""
        o = self.options
        self._started = True
        if not (o.tensorboard or o.mlflow or o.wandb):
            return
        try:
            sinks = make_sinks(dict(os.environ if o.env is None else o.env), run_dir, o.tensorboard, o.mlflow, o.wandb)
        except SinkError as exc:
            self._put(ev.Notice(t=time.time(), level="error", source="sinks", message=str(exc)))
            return
        self.runners = [SinkRunner(s, self._say) for s in sinks]
        info = run_info(state)
        for r in self.runners:
            r.start(info)

    def poll(self, state: RunState, now: float, run_dir: Path) -> None:
        if not self._started:
            self._start(state, run_dir)
        if not self.runners or now < self._next_t:
            return
        self._next_t = now + FRAME_EVERY_S
        frame = self.taker.take(state, now)
        for r in self.runners:
            r.offer(frame)

    def close(self, state: RunState, summary: Summary, run_dir: Path, record: Callable[[ev.Event], None],
              flush: Callable[[], None] | None = None) -> None:
        """The end to every sink at once, then a bounded wait; one notice a sink. First, what is being
        finished, journaled and flushed (``flush``): a viewer says the workload exited and what it waits
        for, not "running" while the sinks take their seconds (issue 53 item 15)."""
        if not self.runners:
            return
        names = ", ".join(TITLES.get(r.sink.name, r.sink.name) for r in self.runners)
        record(ev.Notice(t=time.time(), level="info", source=FINISHING, message=names))
        if flush is not None:
            flush()
        deadline = time.monotonic() + CLOSE_WAIT_S
        artifacts = {"summary.json": to_json(summary), "summary.md": to_markdown(summary)}
        try:
            artifacts["report.html"] = report_html(state, run_dir, summary)
        except Exception as exc:  # noqa: BLE001 - the report is extra; the figures still go
            artifacts["report-error.txt"] = f"report.html could not be made: {exc!r}\n"
        end = self.taker.end(state, state.last_t, artifacts, summary.figures)
        for r in self.runners:
            r.send_end(end, max(0.0, deadline - time.monotonic()))
        for r in self.runners:
            level, line = r.result(deadline)
            record(ev.Notice(t=time.time(), level=level, source="sinks", message=line))
