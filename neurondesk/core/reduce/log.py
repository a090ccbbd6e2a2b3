"""What was said: the workload's output lines (bounded), neurondesk's notices, the errors the
workload printed, and how many lines a collector could not parse."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from neurondesk.core import events as ev

OUTPUT_KEEP = 5000  # workload output lines kept for the console's log (output_total counts all)
NOTICES_KEEP = 200


class LogReducer:
    def __init__(self) -> None:
        self.output: deque[ev.OutputLine] = deque(maxlen=OUTPUT_KEEP)  # the latest OutputLine events
        self.output_total = 0
        self.notices: deque[ev.Notice] = deque(maxlen=NOTICES_KEEP)
        self.errors: list[ev.LogError] = []
        self.parse_problems = 0

    def handlers(self) -> dict[str, Callable]:
        return {"output": self.on_output, "notice": self.on_notice, "log_error": self.on_log_error,
                "parse_problem": self.on_parse_problem}

    def on_output(self, e: ev.OutputLine) -> None:
        self.output.append(e)
        self.output_total += 1

    def on_notice(self, e: ev.Notice) -> None:
        self.notices.append(e)

    def on_log_error(self, e: ev.LogError) -> None:
        self.errors.append(e)

    def on_parse_problem(self, e: ev.ParseProblem) -> None:
        self.parse_problems += 1
