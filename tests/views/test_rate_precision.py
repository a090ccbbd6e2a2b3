"""A figure's precision fits its size (issue 50, item 7: "38,981.7 steps/hour"): one rule for the
figures of kind "rate" (reports/fmt.rate: three significant digits, no digit of the whole part
dropped), used by the summary, the status line, the HTML report and compare alike."""

from __future__ import annotations

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.run_figures import FIGURES, run_figures
from neurondesk.core.figures.series import chart_line
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.compare import compare
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.run_view import view_of
from neurondesk.reports import compare_writer, fmt
from neurondesk.reports.html_report import ReportRun, render
from neurondesk.reports.summary_writer import to_markdown
from neurondesk.views.headless import status_line


@pytest.mark.parametrize(("x", "shown"), [
    (38_981.7, "38,982"), (191.94, "192"), (300.0, "300"), (29.84, "29.8"), (3.402, "3.40"),
    (0.01234, "0.0123"), (99.96, "100"), (9.999, "10.0"), (0.0, "0"), (None, "—"),
])
def test_a_rate_keeps_three_significant_digits_and_its_whole_part(x, shown):
    assert fmt.rate(x) == shown


def test_every_rate_figure_is_shown_by_the_one_rule():
    assert [i.name for i in FIGURES if i.kind == "rate"]  # steps/hour, samples/s ... are rates
    for x in (38_981.7, 191.94, 3.402):
        assert fmt.value_text(x, "rate") == fmt.rate(x)


def run(step_s: float) -> RunState:
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "train.py"], warmup_steps=2))
    s.apply(ev.ProcessAttached(t=0.1, pid=9))
    t = 1.0
    for i in range(30):
        t += step_s
        s.apply(ev.StepEnded(t=t, pid=9, step=i, duration_s=step_s, samples=12, tokens=12 * 100))
    return s


def test_38981_steps_an_hour_read_38982_in_every_output():
    state = run(3600 / 38_981.7)  # 92.35 ms a step
    f = run_figures(state)
    assert f.steps_per_hour == pytest.approx(38_981.7)
    s = run_summary(state)
    md = to_markdown(s)
    line = status_line(view_of(state, state.last_t))
    page = render([ReportRun(s, chart_line(state.parts.steps, points=600)[0], [], "run")])
    compared = compare_writer.to_markdown(compare([s, run_summary(run(0.1))]))
    for text in (md, line, page, compared):
        assert "38,982" in text and "38,981.7" not in text
    assert "| steps/hour | 38,982 |" in md
    assert "38,982 steps/hour" in line
    assert f"| samples/s (steady) | {fmt.rate(12 / (3600 / 38_981.7))} |" in md  # 130, not 129.9
    assert "| samples/s (steady) | 130 |" in md
