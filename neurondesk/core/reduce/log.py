"""What was said: the workload's output lines (bounded), neurondesk's notices, the errors the
workload printed, and how many lines a collector could not parse."""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable

from neurondesk.core.events import run_events as ev

OUTPUT_KEEP = 5000  # workload output lines kept for the console's log (output_total counts all)
# ... and at most this many characters of them: 5000 lines of 64 KiB (the bound of one line) would
# be 320 MB in the recorder, in every viewer and in each checkpoint
OUTPUT_KEEP_CHARS = 8 << 20
NOTICES_KEEP = 200
DETAIL_KEEP = 20  # consequence lines kept under one error
_PARENT_LOOKBACK = 32  # how far back a consequence looks for its error


class LogReducer:
    def __init__(self) -> None:
        self.output: deque[ev.OutputLine] = deque(maxlen=OUTPUT_KEEP)  # the latest OutputLine events
        self.output_total = 0
        self.output_chars = 0  # of the kept lines' text
        self.notices: deque[ev.Notice] = deque(maxlen=NOTICES_KEEP)
        # the alerts (notices of source "alert") apart, counted: many other notices never push one out
        # before a viewer's --notify has rung it (views/terminal_notify.py)
        self.alerts: deque[ev.Notice] = deque(maxlen=NOTICES_KEEP)
        self.alerts_total = 0
        self.errors: list[ev.LogError] = []
        self.parse_problems = 0

    def handlers(self) -> dict[str, Callable]:
        return {"output": self.on_output, "notice": self.on_notice, "log_error": self.on_log_error,
                "parse_problem": self.on_parse_problem}

    def on_output(self, e: ev.OutputLine) -> None:
        if len(self.output) == OUTPUT_KEEP:
            self.output_chars -= len(self.output[0].text)
        self.output.append(e)
        self.output_chars += len(e.text)
        while self.output_chars > OUTPUT_KEEP_CHARS and len(self.output) > 1:  # the oldest go first
            self.output_chars -= len(self.output.popleft().text)
        self.output_total += 1

    def on_notice(self, e: ev.Notice) -> None:
        self.notices.append(e)
        if e.source == "alert":
            self.alerts.append(e)
            self.alerts_total += 1

    def on_log_error(self, e: ev.LogError) -> None:
        if e.continues:
            i = self._parent(e)
            if i is not None:
                parent = self.errors[i]
                detail = [*parent.detail, *e.detail][:DETAIL_KEEP]
                self.errors[i] = dataclasses.replace(parent, code=parent.code or e.code, detail=detail)
                return
            e = dataclasses.replace(e, continues=False)  # its error was not seen: it stands alone
        self.errors.append(e)

    def _parent(self, e: ev.LogError) -> int | None:
        """The latest error from the same source and process: the one ``e`` continues."""
        for i in range(len(self.errors) - 1, max(-1, len(self.errors) - 1 - _PARENT_LOOKBACK), -1):
            if self.errors[i].source == e.source and self.errors[i].pid == e.pid:
                return i
        return None

    def on_parse_problem(self, e: ev.ParseProblem) -> None:
        self.parse_problems += 1
