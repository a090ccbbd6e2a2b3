"""The recorder's alerts: core/rules/alert_rules.py's rules, polled from the recorder loop, each alert
journaled as a notice (``source="alert"``; a viewer with ``--notify`` rings the terminal for it) and
sent to ``--notify-url`` by the webhook sender's own thread. ``--budget-stop`` stops the workload
at 100% of the budget, as the console's `s` does.

Without ``--notify`` / ``--notify-url`` only the hang, its end and the budget are journaled (they
are run facts every view shows); with either, every alert is.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from neurondesk.core.events import run_events as ev
from neurondesk.core.rules.alert_rules import Alert, AlertRules, AlertSettings
from neurondesk.core.rules.checks import evaluate
from neurondesk.core.summary.types import Summary
from neurondesk.recorder.flight_desk import Reading, say_hang_with_flight
from neurondesk.recorder.notify_webhook import WebhookSender
from neurondesk.recorder.options import RunOptions

POLL_EVERY_S = 1.0
ALWAYS = frozenset({"hung", "resumed", "budget_warn", "budget_reached"})
CLOSE_WAIT_S = 6.0  # at the end of the run, queued alerts are tried this long at most (a 5 s timeout, once)


class AlertDesk:
    def __init__(self, options: RunOptions, run_id: str, record: Callable[[ev.Event], None],
                 put: Callable[[ev.Event], None], stop_workload: Callable[[], None],
                 flight: Callable[[object], Reading | None] | None = None) -> None:
        """``flight(state)``: how to read the ranks' Flight Recorder dumps at a hang (flight_desk.py)."""
        self.flight, self._put = flight, put
        self.rules = AlertRules(AlertSettings(compile_wall_s=options.notify_compile_s))
        self.every = bool(options.notify or options.notify_url)
        self.budget_stop = options.budget_stop
        self.checks = options.checks
        self._record, self._stop = record, stop_workload
        self._next_t = 0.0
        self._broken_said = False
        self.webhook: WebhookSender | None = None
        if options.notify_url:  # what it says comes back through the recorder's queue (another thread)
            self.webhook = WebhookSender(options.notify_url, run_id, say=lambda words: put(ev.Notice(
                t=time.time(), level="warn", source="alerts", message=words)))

    def poll(self, state, now: float) -> None:
        if now < self._next_t:
            return
        self._next_t = now + POLL_EVERY_S
        try:
            alerts = self.rules.check(state, now)
        except Exception as exc:  # noqa: BLE001 - an alert rule never ends the recording
            return self._broken(now, exc)
        for alert in alerts:
            read = self.flight(state) if alert.event == "hung" and self.flight is not None else None
            if read is not None:  # the notice waits for the dumps, off this loop
                say_hang_with_flight(alert.message, read, lambda words, blocked, a=alert: self._said_late(a, words,
                                                                                                         blocked))
                continue
            self._say(alert)
            if alert.event == "budget_reached" and self.budget_stop:
                self._stop()
                self._record(ev.Notice(t=now, level="warn", source="alert",
                                       message="stopping the workload (--budget-stop): SIGINT now, SIGTERM after 10 s"))

    def at_end(self, state, now: float, summary: Summary) -> None:
        """The run's end: finished or failed, and the checks (before the journal closes)."""
        try:
            failed = evaluate(summary, self.checks) if self.checks is not None else []
            alerts = self.rules.check(state, now) + self.rules.at_end(state, now, failed)
        except Exception as exc:  # noqa: BLE001
            return self._broken(now, exc)
        for alert in alerts:
            self._say(alert)

    def _broken(self, now: float, exc: Exception) -> None:
        if not self._broken_said:
            self._broken_said = True
            self._record(ev.Notice(t=now, level="error", source="alerts",
                                   message=f"alerts are off for this run: {type(exc).__name__}: {exc}"[:300]))
        self._next_t = float("inf")

    def close(self) -> None:
        if self.webhook is not None:
            self.webhook.close(CLOSE_WAIT_S)

    def _said_late(self, alert: Alert, message: str, blocked: ev.CollectiveBlocked | None) -> None:
        """From the Flight Recorder's thread: through the recorder's queue, never into its state."""
        self._put(ev.Notice(t=alert.t, level=alert.level, source="alert", message=message))
        if blocked is not None:
            self._put(blocked)
        if self.webhook is not None:
            self.webhook.send(msgspec.structs.replace(alert, message=message))

    def _say(self, alert: Alert) -> None:
        if self.every or alert.event in ALWAYS:
            self._record(ev.Notice(t=alert.t, level=alert.level, source="alert", message=alert.message))
        if self.webhook is not None:
            self.webhook.send(alert)
