"""The headless status line at the run's end: the final one is printed once (issue 50 item 7), and while
the recorder still finishes its sinks after the workload exited the line says so, with the run's clock
stopped at the exit, not "running" with a clock that goes on (issue 53 item 15). A source stand-in
replays events as a FollowSource would (stderr is not a terminal: each status line is a line); the
recorder's half (what it finishes, journaled and flushed before the sinks' wait) on SinkDesk itself."""

from __future__ import annotations

import io
from types import SimpleNamespace

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.recorder import sink_desk
from neurondesk.recorder.options import RunOptions
from neurondesk.views import headless
from neurondesk.views.headless import HeadlessPrinter

T0 = 1_790_000_000.0


class StandInSource:
    """Each poll applies the next batch of events; ``finish`` answers ``finished`` in turn (False: the
    recorder still writes), polling the rest first as FollowSource.finish does."""

    run_dir = "/runs/x"
    recorder_lost = False
    final_summary = None
    attached = False

    def __init__(self, batches: list[list[ev.Event]], finished: list[bool]) -> None:
        self.state = RunState()
        self.batches, self.finished, self.new_events = list(batches), list(finished), []
        self.waits: list[float | None] = []

    @property
    def done(self) -> bool:
        return self.state.finished

    def poll(self) -> int:
        self.new_events = self.batches.pop(0) if self.batches else []
        for e in self.new_events:
            self.state.apply(e)
        return len(self.new_events)

    def finish(self, timeout_s: float | None = None) -> bool:
        self.waits.append(timeout_s)
        while self.batches:
            self.poll()
        return self.finished.pop(0) if self.finished else True

    def new_output(self) -> list:
        return []

    def now(self) -> float:
        return T0 + 21.0  # 16 s after the exit below: the status line's clock must not say it

    def send_signal(self, sig: str) -> str:
        return ""

    def summary(self):  # FollowSource.summary: the recorder's, else rebuilt by core
        return self.final_summary if self.final_summary is not None else run_summary(self.state)


def started(t: float = T0) -> list[ev.Event]:
    return [ev.RunStarted(t=t, run_id="r", command=["python", "train.py"], price_per_hour=1.0),
            ev.ProcessAttached(t=t, pid=123)]


def status_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if " | step " in line]


def test_the_final_status_line_is_printed_once() -> None:
    """The workload seen and its end in the same poll: the loop printed its status, then _final again."""
    source = StandInSource([started() + [ev.RunFinished(t=T0 + 5, exit_code=0)]], finished=[True])
    err = io.StringIO()
    assert HeadlessPrinter(source, out=io.StringIO(), err=err).run(handle_signals=False) == 0
    assert [line.split(" | ")[0] for line in status_lines(err.getvalue())] == ["neurondesk: finished (exit 0)"]


def test_while_the_sinks_finish_the_line_says_the_workload_exited_and_what_is_finishing() -> None:
    source = StandInSource([started(), [ev.RunFinished(t=T0 + 5, exit_code=0)],
                            [ev.Notice(t=T0 + 5.1, level="info", source=headless.FINISHING,
                                       message="TensorBoard, MLflow")]],
                           finished=[False, True])  # the recorder still writes when first asked
    err = io.StringIO()
    HeadlessPrinter(source, out=io.StringIO(), err=err).run(handle_signals=False)
    lines = status_lines(err.getvalue())
    assert lines[-2].startswith("neurondesk: workload exited 0; finishing: TensorBoard, MLflow | step 0")
    assert lines[-2].endswith("| 0:05")  # the run ended at the exit: no clock running on to 0:21
    assert lines[-1].startswith("neurondesk: finished (exit 0)")
    assert not any(line.startswith("neurondesk: running") for line in lines)
    assert source.waits == [headless.FINISH_QUIET_S, None]


def test_a_quick_end_says_no_finishing_line() -> None:
    source = StandInSource([started(), [ev.RunFinished(t=T0 + 5, exit_code=0)]], finished=[True])
    err = io.StringIO()
    HeadlessPrinter(source, out=io.StringIO(), err=err).run(handle_signals=False)
    assert "finishing" not in err.getvalue()


def test_the_recorder_journals_and_flushes_what_it_finishes_before_the_sinks_wait(tmp_path) -> None:
    order: list[str] = []

    class Runner:
        def __init__(self, name: str) -> None:
            self.sink = SimpleNamespace(name=name)

        def send_end(self, end, wait_s: float) -> None:
            order.append(f"end {self.sink.name}")

        def result(self, deadline: float) -> tuple[str, str]:
            return "info", f"{self.sink.name}: written"

    desk = sink_desk.SinkDesk(RunOptions(), lambda e: None)
    desk.runners = [Runner("tensorboard"), Runner("mlflow")]
    state = RunState()
    for e in started():
        state.apply(e)

    said: list[ev.Event] = []
    desk.close(state, run_summary(state), tmp_path, lambda e: (said.append(e), order.append(f"say {e.source}")),
               flush=lambda: order.append("flush"))
    assert order[:3] == ["say finishing", "flush", "end tensorboard"]
    assert said[0].message == "TensorBoard, MLflow" and said[0].level == "info"
    assert sink_desk.FINISHING == headless.FINISHING  # the two rooms name the notice alike
