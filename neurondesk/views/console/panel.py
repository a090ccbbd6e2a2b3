"""The base of every panel: a bordered box that re-renders from the frame's RunView when asked."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.containers import Vertical
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static

try:  # Textual's own cache of a widget's rendered rows (private): without it, Line renders whole
    from textual.widget import _RenderCache
except ImportError:  # another Textual
    _RenderCache = None

from neurondesk.core.view.run_view import RunView


class Line(Static):
    """A Static that repaints only what really changed: nothing when its text is the same; only
    the lines that changed when it keeps its shape (as many lines, none wider than the widget),
    so a clock or one figure that moves re-renders one row, not the whole text; a full render
    (and a layout pass) otherwise."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._key: tuple | None = None
        self._line_keys: list[tuple] = []
        self._pending: dict[int, Text] = {}  # rows to render again, by the partial path
        self.text = Text()  # what it shows now (tests read it)

    def show(self, text: Text) -> None:
        key = (text.plain, tuple(text.spans))
        if key == self._key:
            return
        width = self.content_size.width
        lines = text.split("\n", allow_blank=True)
        keys = [(line.plain, tuple(line.spans), line.style) for line in lines]
        # a layout pass only when the height may change: another line count, or a line that wraps
        same_shape = (self._key is not None and len(keys) == len(self._line_keys)
                      and width > 0 and all(len(k[0]) <= width for k in keys))
        old, self._key, self._line_keys, self.text = self._line_keys, key, keys, text
        cache = self._render_cache
        quiet = not self._dirty_regions or self._pending  # no full render is due already
        if (_RenderCache is not None and same_shape and quiet and cache.size == self.size
                and len(cache.lines) >= len(keys)):
            changed = [y for y, (a, b) in enumerate(zip(old, keys, strict=True)) if a != b]
            if not changed:  # the same rows, told apart only by how their spans were cut
                return
            for y in changed:
                self._pending[y] = lines[y]
            self.refresh(*(Region(0, y, width, 1) for y in changed))
            return
        self._pending.clear()
        self.update(text, layout=not same_shape)

    def _set_dirty(self, *regions: Region) -> None:
        if not regions:  # all of it (a style, the size, new text): no partial render then
            self._pending.clear()
        super()._set_dirty(*regions)

    def render(self):
        return self.text if self._key is not None else super().render()

    def _render_content(self) -> None:
        """Only the pending rows when the rest of the last render still stands (same size)."""
        pending, cache = self._pending, self._render_cache
        if pending and cache.size == self.size and max(pending) < len(cache.lines):
            try:
                lines = list(cache.lines)
                width, style = self.size.width, self.visual_style
                for y, text in pending.items():
                    lines[y] = _on_row(Visual.to_strips(self, visualize(self, text), width, 1, style)[0], y)
                self._render_cache = _RenderCache(self.size, lines)
                self._dirty_regions.clear()
                pending.clear()
                return
            except Exception:  # noqa: BLE001 - Textual's internals moved: render the whole text, as before
                pass
        pending.clear()
        super()._render_content()


def _on_row(strip: Strip, y: int) -> Strip:
    """A row rendered alone (as row 0) moved to row ``y``: the offsets Textual keeps in each
    segment's meta for text selection say row y, as in a render of the whole text."""
    if not y:
        return strip
    segments = []
    for text, style, control in strip:
        if style is not None and style._meta and (offset := style.meta.get("offset")) is not None:
            style = style + RichStyle.from_meta({"offset": (offset[0], y)})
        segments.append(Segment(text, style, control))
    return Strip(segments, strip.cell_length)


class Panel(Vertical):
    """Subclasses set `NAME` (tab label) and `KEY` (its key), and implement `render_view`."""

    NAME = ""
    KEY = ""
    TIME_DEPENDENT = False  # re-render on every tick, not only when events arrived
    EVERY = 1  # render on every EVERY-th frame (frames are 1 s apart; slow-moving figures: 2, every 2 s)

    def __init__(self, **kwargs) -> None:
        super().__init__(classes="panel", **kwargs)
        self.border_title = f"{self.NAME} [{self.KEY}]" if self.KEY else self.NAME
        self._seen_events = -1

    def update_view(self, view: RunView, frame: int = 0) -> None:
        if frame % self.EVERY and self._seen_events >= 0 and not view.finished:
            return
        if self.TIME_DEPENDENT or view.event_count != self._seen_events:
            self._seen_events = view.event_count
            self.render_view(view)

    def render_view(self, view: RunView) -> None:  # pragma: no cover - abstract
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
