"""The base of every panel: a bordered box that re-renders from RunState when asked."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from neurondesk.core.state import RunState


class Line(Static):
    """A Static that repaints only when its text really changed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._key: tuple | None = None
        self.text = Text()  # what it shows now (tests read it)

    def show(self, text: Text) -> None:
        key = (text.plain, tuple(text.spans))
        if key == self._key:
            return
        # a layout pass only when the height may change: another line count, or a line that wraps
        width = self.content_size.width
        lines = text.plain.split("\n")
        same_shape = (self._key is not None and len(lines) == self._key[0].count("\n") + 1
                      and width > 0 and all(len(line) <= width for line in lines))
        self._key = key
        self.text = text
        self.update(text, layout=not same_shape)


class Panel(Vertical):
    """Subclasses set `NAME` (tab label) and `KEY` (its key), and implement `render_state`."""

    NAME = ""
    KEY = ""
    TIME_DEPENDENT = False  # re-render on every tick, not only when events arrived
    EVERY = 1  # render on every EVERY-th frame (slow-moving figures: 2, i.e. once a second)

    def __init__(self, **kwargs) -> None:
        super().__init__(classes="panel", **kwargs)
        self.border_title = f"{self.NAME} [{self.KEY}]" if self.KEY else self.NAME
        self._seen_events = -1

    def update_view(self, state: RunState, now: float, frame: int = 0) -> None:
        if frame % self.EVERY and self._seen_events >= 0 and not state.finished:
            return
        if self.TIME_DEPENDENT or state.event_count != self._seen_events:
            self._seen_events = state.event_count
            self.render_state(state, now)

    def render_state(self, state: RunState, now: float) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def invalidate(self) -> None:
        """Render again at the next update (after being hidden, or resized)."""
        self._seen_events = -1


def kv(*pairs: tuple[str, str | Text], sep: str = "  ") -> Text:
    """'label value  label value' with dim labels."""
    out = Text()
    for i, (label, value) in enumerate(pairs):
        if i:
            out.append(sep)
        out.append(label + " ", style="dim")
        out.append(value if isinstance(value, Text) else Text(value))
    return out
