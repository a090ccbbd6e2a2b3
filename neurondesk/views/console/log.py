"""Log: the workload's stdout and stderr (the OutputLine events of the frame's RunView), bounded and
searchable; compile lines tinted, errors red, noise dimmed. The workload's own colours (SGR) are
kept as styles; every other control sequence in its output is dropped (reports/safe_text.py), so
none reaches the user's terminal.

The view is a fixed-size window onto a bounded deque of lines: appending repaints the window and
never changes the widget's size, so a chatty workload costs no layout passes.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Input

from neurondesk.core.events import run_events as ev
from neurondesk.core.view.run_view import LogLines, RunView
from neurondesk.views.console.panel import Panel
from neurondesk.views.console.rich_text import safe_text

MAX_LINES = 5000  # the widget's bound; RunState keeps the same number of lines
WRITE_FRAMES = 2  # new lines are shown in batches, every 2nd frame (once a second)
TAG_STYLE = {"compile": "cyan", "error": "bold red", "noise": "dim"}


def styled(line: ev.OutputLine, needle: str = "") -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("err " if line.stream == "stderr" else "    ", style="dim red" if line.stream == "stderr" else "")
    t.append_text(safe_text(line.text, style=TAG_STYLE.get(line.tag or "", "")))
    if needle:
        t.highlight_words([needle], style="reverse", case_sensitive=False)
    return t


class LogView(Widget, can_focus=True):
    """The last lines (or, scrolled back, earlier ones) of a bounded buffer."""

    BINDINGS = [
        Binding("up", "scroll(1)", "Up", show=False),
        Binding("down", "scroll(-1)", "Down", show=False),
        Binding("pageup", "scroll(20)", "Page up", show=False),
        Binding("pagedown", "scroll(-20)", "Page down", show=False),
        Binding("home", "scroll(1000000)", "Oldest", show=False),
        Binding("end", "follow", "Follow", show=False),
    ]

    def __init__(self, max_lines: int = MAX_LINES, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines: deque[Text] = deque(maxlen=max_lines)
        self.back = 0  # lines scrolled back from the end; 0 = following

    def append(self, texts: list[Text]) -> None:
        self.lines.extend(texts)
        if self.back:
            self.back = min(self.back + len(texts), self._max_back())
        self.refresh()

    def clear(self) -> None:
        self.lines.clear()
        self.back = 0
        self.refresh()

    def visible(self) -> list[Text]:
        height = max(1, self.content_size.height)
        end = len(self.lines) - self.back
        return list(islice(self.lines, max(0, end - height), end))

    def render(self) -> Text:
        return Text("\n", no_wrap=True, overflow="ellipsis").join(self.visible())

    def _max_back(self) -> int:
        return max(0, len(self.lines) - max(1, self.content_size.height))

    def action_scroll(self, lines: int) -> None:
        self.back = max(0, min(self.back + lines, self._max_back()))
        self._say_where()
        self.refresh()

    def action_follow(self) -> None:
        self.back = 0
        self._say_where()
        self.refresh()

    def on_mouse_scroll_up(self, event) -> None:
        self.action_scroll(3)

    def on_mouse_scroll_down(self, event) -> None:
        self.action_scroll(-3)

    def _say_where(self) -> None:
        panel = self.parent
        if isinstance(panel, LogPanel) and not panel.needle:
            panel.border_subtitle = f"{self.back} lines below · end: follow" if self.back else ""


class LogPanel(Panel):
    NAME = "Log"
    KEY = "l"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._seen_total = 0  # lines already shown (of LogLines.total)
        self._fresh = True
        self.needle = ""

    def compose(self) -> ComposeResult:
        yield LogView(id="log-lines")
        yield Input(placeholder="/ search the log (enter: filter, esc: clear)", id="log-search")

    @property
    def view(self) -> LogView:
        return self.query_one("#log-lines", LogView)

    def update_view(self, view: RunView, frame: int = 0) -> None:
        if view.log.total != self._seen_total and (
                self._fresh or frame % WRITE_FRAMES == 0 or view.finished):
            self._fresh = False
            self.render_view(view)

    def invalidate(self) -> None:
        super().invalidate()
        self._fresh = True

    def render_view(self, view: RunView) -> None:
        log = view.log
        new = log.total - self._seen_total
        if new <= 0:
            return
        self._write(list(islice(log.lines, max(0, len(log.lines) - new), None)))
        self._seen_total = log.total

    def _write(self, lines: list[ev.OutputLine]) -> None:
        needle = self.needle.lower()
        batch = [t for t in (styled(line, self.needle) for line in lines) if not needle or needle in t.plain.lower()]
        if batch:
            self.view.append(batch)

    def refilter(self, log: LogLines, needle: str) -> int:
        """Show only the kept lines that contain `needle` (all of them when empty); returns matches."""
        self.needle = needle
        self.view.clear()
        self._seen_total = log.total
        self._write(list(log.lines))
        return len(self.view.lines)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        needle = event.value.strip()
        matches = self.refilter(self.app.frame_view().log, needle)
        self.border_subtitle = f"filter “{needle}”: {matches} lines" if needle else ""
        self.view.focus()

    def on_key(self, event) -> None:
        search = self.query_one("#log-search", Input)
        if event.key == "escape" and search.has_focus:
            event.stop()
            search.value = ""
            self.refilter(self.app.frame_view().log, "")
            self.border_subtitle = ""
            self.view.focus()
