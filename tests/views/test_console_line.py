"""panel.Line's partial repaint: when a text keeps its shape, only the rows that changed are
rendered again, and what it shows is exactly what a full render of the new text shows."""

from __future__ import annotations

import asyncio

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.visual import Visual, visualize
from textual.widget import Widget

from neurondesk.views.console.panel import Line

# the console under the newest Textual too (make test-latest)
pytestmark = pytest.mark.latest


class _One(App):
    CSS = "Line { height: auto; }"

    def compose(self) -> ComposeResult:
        yield Line(id="line")


def _text(i: int) -> Text:
    t = Text()
    t.append(" running ", style="bold black on green")
    t.append("  elapsed ", style="dim")
    t.append(f"0:{i:02d}", style="bold")
    t.append("\n")
    t.append("static row", style="italic dim")
    t.append("\n")
    t.append(f"cpu{i % 3} ", style="cyan")
    t.append("█" * (i % 7), style="green")
    t.append(" " * (7 - i % 7), style="on grey19")
    return t


def _full(line: Line) -> list[list]:
    w, h = line.size
    return [list(s) for s in Visual.to_strips(line, visualize(line, line.text), w, h, line.visual_style)]


def test_partial_repaint_matches_a_full_render():
    async def go():
        app = _One()
        async with app.run_test(size=(60, 10)) as pilot:
            line = app.query_one(Line)
            line.show(_text(0))
            await pilot.pause()
            full = []
            orig = Widget._render_content

            def count(widget):
                if widget is line:
                    full.append(1)
                return orig(widget)

            Widget._render_content = count
            try:
                for i in range(1, 12):
                    line.show(_text(i))
                    await pilot.pause()
                    assert [line.render_line(y).text for y in range(3)] == [
                        "".join(seg.text for seg in s) for s in _full(line)]
                    assert [list(line.render_line(y)) for y in range(3)] == _full(line)[:3]
            finally:
                Widget._render_content = orig
            # only the changed rows were rendered again (the clock, the bar), never the whole text
            assert not full
            assert line.text.plain == _text(11).plain
            # a new shape (a fourth row) takes the full path, and still shows the right text
            t = _text(12)
            t.append("\nmore")
            line.show(t)
            await pilot.pause()
            assert line.size.height == 4
            assert [list(line.render_line(y)) for y in range(4)] == _full(line)[:4]

    asyncio.run(go())
