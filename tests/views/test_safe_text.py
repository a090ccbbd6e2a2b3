"""The user's terminal belongs to the user (issue 9): control sequences in the workload's output and
in text from tools never reach it through the console; the workload's colours (SGR) stay, as style.

Unit tests of reports/safe_text.py, a property-based test of its promise, and the real console
(App.run_test) on a journal whose output lines, compile records and notices are hostile."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from test_console_replay import WIDE, run_app, text
from textual.widgets import DataTable

from neurondesk.core.events import run_events as ev
from neurondesk.reports.safe_text import clean, has_no_controls_but_sgr
from neurondesk.sources.replay import ReplaySource
from neurondesk.store.journal import JournalWriter
from neurondesk.views.console.log import LogView, styled
from neurondesk.views.console.rich_text import safe_text

ESC = "\x1b"
SGR = re.compile(r"\x1b\[[0-9;:]*m")
CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")

HOSTILE = [
    ("clipboard (OSC 52, BEL)", "a\x1b]52;c;cm0gLXJmIH4K\x07b", "ab"),
    ("clipboard (OSC 52, ST)", "a\x1b]52;c;cm0gLXJmIH4K\x1b\\b", "ab"),
    ("window title", "\x1b]0;pwned\x07title", "title"),
    ("hyperlink (OSC 8)", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\", "click"),
    ("DCS query", "x\x1bP$qm\x1b\\y", "xy"),
    ("APC / PM / SOS", "\x1b_apc\x1b\\1\x1b^pm\x1b\\2\x1bXsos\x1b\\3", "123"),
    ("screen clear and cursor home", "\x1b[2J\x1b[Hcleared", "cleared"),
    ("8-bit CSI and OSC", "\x9b2Jc1\x9d0;t\x07!", "c1!"),
    ("an OSC never ended", "before\x1b]0;title to the end", "before"),
    ("lone ESC and charset switch", "a\x1b(0b\x1b", "ab"),
    ("C0 controls", "bell\x07 back\x08space\x00 tab\tkept", "bell backspace tab\tkept"),
    ("line breaks", "one\rtwo\nthree", "one two three"),
    ("private CSI (mouse, alt screen)", "\x1b[?1049h\x1b[?1000hx", "x"),
]


def test_each_control_sequence_is_dropped_and_its_neighbours_kept():
    for what, raw, want in HOSTILE:
        assert clean(raw) == want, what
        assert clean(raw, sgr=True) == want, what
        assert safe_text(raw).plain == want, what


def test_sgr_is_kept_as_style_and_plain_text_is_untouched():
    t = safe_text("\x1b[1;31mFAILED\x1b[0m in \x1b[38;5;208m3\x1b[0m tests\x1b]0;t\x07")
    assert t.plain == "FAILED in 3 tests"
    styles = {t.plain[s.start:s.end]: s.style for s in t.spans}
    assert styles["FAILED"].bold and styles["FAILED"].color.name == "color(1)"
    assert styles["3"].color.number == 208
    assert clean("\x1b[31mred\x1b[0m") == "red"
    for plain in ("", "ordinary text", "naïve — ünïcode ✓ 漢字", "a\tb"):
        assert clean(plain) is plain and safe_text(plain).plain == plain


def rendered(t) -> str:
    """What a terminal would be sent for `t`: rich's rendering with colours on."""
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=300, legacy_windows=False).print(
        t, end="", soft_wrap=True)
    return out.getvalue()


ANY_TEXT = st.lists(st.one_of(st.characters(max_codepoint=0xff), st.characters(),
                              st.sampled_from(["\x1b[", "\x1b]", "\x1bP", "\x1b\\", "\x07", "\x9c", "\x9b", "m",
                                               ";", "31", "8;;", "\x1b[31m", "\x1b[0m", "?"])), max_size=40).map("".join)


@pytest.mark.slow  # seconds of pure work: `make test` runs it, `make test-fast` does not
@settings(max_examples=500, deadline=None, derandomize=True)
@given(s=ANY_TEXT)
def test_the_sanitiser_output_has_no_escape_but_sgr_and_no_control_but_tab(s):
    kept = clean(s, sgr=True)
    assert has_no_controls_but_sgr(kept)
    assert ESC not in SGR.sub("", kept) and not CONTROLS.search(SGR.sub("", kept))
    assert not CONTROLS.search(clean(s))  # without sgr: none at all
    t = safe_text(s)
    assert not CONTROLS.search(t.plain)
    assert not CONTROLS.search(SGR.sub("", rendered(t)))  # what would reach the terminal
    assert clean(clean(s)) == clean(s)


def test_log_lines_are_sanitised_with_their_colour_kept():
    t = styled(ev.OutputLine(t=0, stream="stdout", text="\x1b]52;c;Zm9v\x07\x1b[32mok\x1b[0m done\x1b[2J"))
    assert t.plain == "    ok done"
    assert any(t.plain[s.start:s.end] == "ok" and s.style.color.number == 2 for s in t.spans)  # green


def test_the_console_shows_hostile_output_compiles_and_notices_without_their_control_sequences(tmp_path):
    run = tmp_path / "hostile"
    run.mkdir()
    evil = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07\x1b]8;;https://x/\x1b\\"
    with JournalWriter(run / "events.jsonl") as w:
        w.write(ev.RunStarted(t=1.0, run_id="hostile", command=["python", f"x{evil}.py"]))
        for i, (_, raw, _) in enumerate(HOSTILE):
            w.write(ev.OutputLine(t=1.1 + i * 0.01, stream="stdout", text=raw))
        w.write(ev.OutputLine(t=1.5, stream="stderr", text="\x1b[31mcolour stays\x1b[0m\x1bP+q544e\x1b\\"))
        w.write(ev.CompileFinished(t=2.0, source="probe", duration_s=0.5, pid=1, step=0, point="p",
                                   location=f"/home/u/tr{evil}ain.py:3", reason=f"cause{evil} here",
                                   frames=[f"f{evil} (/home/u/train.py:3)"], ok=False, error=f"bad{evil}\x1b[2J"))
        w.write(ev.Notice(t=3.0, level="warn", source=f"neuron-{evil}monitor", message=f"tool said{evil}\x1b[H no"))

    async def script(app, pilot):
        shown = {"devices": text(app, "#devices-text")}
        await pilot.press("l")
        await pilot.pause()
        view = app.query_one(LogView)
        shown["log"] = [rendered(t) for t in view.lines]
        shown["log_plain"] = [t.plain for t in view.lines]
        await pilot.press("c")
        await pilot.pause()
        shown["detail"] = rendered(app.query_one("#compile-detail").text)
        table = app.query_one("#compile-table", DataTable)
        shown["row"] = [rendered(c) for c in table.get_row_at(0)]
        shown["header"] = rendered(app.query_one("#header").text)
        return shown

    shown = run_app(ReplaySource(run, speed=0), WIDE, script)
    everything = [shown["devices"], shown["detail"], shown["header"], *shown["log"], *shown["row"]]
    for s in everything:
        for line in s.split("\n"):  # the panels' own line breaks
            assert has_no_controls_but_sgr(line), repr(line)
        assert "pwned" not in s and "cm0g" not in s and "https://x/" not in s
    assert shown["log_plain"][:len(HOSTILE)] == [f"    {want}" for _, _, want in HOSTILE]
    assert shown["log_plain"][-1] == "err colour stays"
    assert "\x1b[31m" in shown["log"][-1] or "\x1b[31;" in shown["log"][-1]  # the workload's red stays red
    assert "neuron-monitor: tool said no" in shown["devices"]
    assert "x.py" in shown["header"]
    assert "cause here" in shown["detail"] and "/home/u/train.py:3" in shown["detail"]
