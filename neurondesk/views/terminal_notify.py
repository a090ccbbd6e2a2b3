"""``--notify`` in the viewer: each alert the recorder journals (a notice with ``source="alert"``)
rings the terminal: the bell, then an OSC 777 (rxvt-unicode, VTE terminals: GNOME Terminal,
Tilix ...) and an OSC 9 (iTerm2, Windows Terminal, kitty, WezTerm) desktop notification. A
terminal that knows neither ignores both. The text is the notice's own, every control sequence
and character taken out (reports/safe_text.py's clean: it may quote the workload's output)."""

from __future__ import annotations

import re

from neurondesk.reports.safe_text import clean

ALERT_SOURCE = "alert"
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_CHARS = 240


def notification(message: str, title: str = "neurondesk") -> str:
    """BEL, OSC 777 and OSC 9 for one message (each OSC ended by ST)."""
    body = _CONTROLS.sub(" ", clean(message))[:MAX_CHARS]  # sequences dropped whole (clean), then the tab
    return f"\a\x1b]777;notify;{title};{body}\x1b\\\x1b]9;{title}: {body}\x1b\\"


class AlertBell:
    """``new_alerts(state)``: the alert messages journaled since the last call. The first call
    only marks where the run stands (an attached viewer does not ring for alerts of the past)."""

    def __init__(self) -> None:
        self._last = None
        self._primed = False

    def new_alerts(self, state) -> list[str]:
        notices = state.notices
        if not self._primed:
            self._primed = True
            self._last = notices[-1] if notices else None
            return []
        fresh = []
        for n in reversed(notices):
            if n is self._last:
                break
            fresh.append(n)
        if notices:
            self._last = notices[-1]
        return [n.message for n in reversed(fresh) if n.source == ALERT_SOURCE]
