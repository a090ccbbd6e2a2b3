"""``--notify`` in the viewer: each alert the recorder journals (a notice with ``source="alert"``)
rings the terminal: the bell, then an OSC 777 (rxvt-unicode, VTE terminals: GNOME Terminal,
Tilix ...) and an OSC 9 (iTerm2, Windows Terminal, kitty, WezTerm) desktop notification. A
terminal that knows neither ignores both. The text is the notice's own, every control sequence
and character taken out (reports/safe_text.py's clean: it may quote the workload's output)."""

from __future__ import annotations

import re

from neurondesk.core.view.pulse import Alerts
from neurondesk.reports.safe_text import clean

ALERT_SOURCE = "alert"  # the notices the recorder journals for its alerts (core/reduce/log.py keeps them apart)
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_CHARS = 240


def notification(message: str, title: str = "neurondesk") -> str:
    """BEL, OSC 777 and OSC 9 for one message (each OSC ended by ST)."""
    body = _CONTROLS.sub(" ", clean(message))[:MAX_CHARS]  # sequences dropped whole (clean), then the tab
    return f"\a\x1b]777;notify;{title};{body}\x1b\\\x1b]9;{title}: {body}\x1b\\"


class AlertBell:
    """``new_alerts(alerts)``: the alert messages journaled since the last call, each once. The first
    call only marks where the run stands (an attached viewer does not ring for alerts of the past).
    Alerts are kept apart from the other notices and counted (core/view/pulse.py's ``Alerts``):
    however many notices arrive between two calls none pushes an alert out unrung, and a state
    reduced again (a checkpoint's copy) rings none twice."""

    def __init__(self) -> None:
        self._seen: int | None = None  # Alerts.total at the last call

    def new_alerts(self, alerts: Alerts) -> list[str]:
        total, messages = alerts.total, alerts.messages
        seen, self._seen = self._seen, total
        if seen is None or total <= seen or not messages:
            return []
        return list(messages[-min(total - seen, len(messages)):])
