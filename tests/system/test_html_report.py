"""`neurondesk report`: the self-contained HTML page of recorded runs (tests/data/journals, real
XLA CPU runs), loaded in a real headless Chromium (Debian package `chromium`): no console message,
its script ran, nothing fetched, and its figures agree with `neurondesk summary --format json`."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REPO

from neurondesk.core.figures.run_figures import rate_text

JOURNALS = DATA / "journals"
sys.path.insert(0, str(REPO / "scripts"))
from report_screenshot import chromium, headless  # noqa: E402

BROWSER = chromium()
if BROWSER is None and os.environ.get("NEURONDESK_REQUIRE_CHROMIUM") == "1":  # CI (.ci/run): fail, never skip
    raise RuntimeError("NEURONDESK_REQUIRE_CHROMIUM=1 but no chromium binary: install the Debian package `chromium`")
needs_chromium = pytest.mark.skipif(BROWSER is None, reason="no chromium binary: install the Debian package `chromium`")
ND = [sys.executable, "-m", "neurondesk.cli"]


def load(page: Path) -> tuple[str, list[str]]:
    """(the DOM after the page's script ran, the console messages Chromium logged)."""
    p = subprocess.run(headless(BROWSER, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, [line for line in p.stderr.splitlines() if ":CONSOLE" in line]


def cli(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([*ND, *args], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    return p


def text_of(dom: str, id_: str) -> str:
    m = re.search(rf'id="{re.escape(id_)}"[^>]*>(.*?)</', dom, re.S)
    assert m, f"no #{id_} in the page"
    return html.unescape(m.group(1)).strip()


def number(text: str) -> float:
    return float(re.sub(r"[^0-9.eE+-]", "", text.split(" ")[0]))


@needs_chromium
def test_the_console_check_sees_a_script_error():
    """The detector the next test relies on: a page whose script fails is caught."""
    page = DATA / "report_with_error.html"
    _, console = load(page)
    assert any("Uncaught ReferenceError" in line for line in console)


@needs_chromium
def test_a_two_run_report_loads_clean_and_agrees_with_the_summaries(tmp_path):
    runs = [tmp_path / "plain", tmp_path / "dynamic"]
    for r in runs:
        shutil.copytree(JOURNALS / r.name, r)
    page = tmp_path / "report.html"
    cli("report", *map(str, runs), "-o", str(page))
    raw = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(""", raw)  # nothing fetched
    dom, console = load(page)
    assert console == []  # no error, no warning, no log line
    assert 'data-ready="1"' in dom  # its script ran to the end
    for i, run in enumerate(runs):
        s = json.loads(cli("summary", str(run), "--format", "json").stdout)
        steps = text_of(dom, f"r{i}-steps")
        assert steps == f"{s['steps']:,}" + (f" / {s['steps_requested']:,}" if s["steps_requested"] else "")
        # a rate is written by the figures table's one rule (three significant digits): the same text
        assert text_of(dom, f"r{i}-samples") == rate_text(s["steady"]["samples_per_s"])
        assert number(text_of(dom, f"r{i}-step-time")) == pytest.approx(s["steady"]["step_time_s"] * 1e3, abs=0.05)
        assert number(text_of(dom, f"r{i}-cost")) == pytest.approx(s["cost"]["total_usd"], abs=5e-5)
        assert text_of(dom, f"r{i}-compiles").startswith(f"{s['compile_count']:,} (")
        section = dom.split(f'id="run-{i}"', 1)[1].split("</section>", 1)[0]
        compile_rows = re.search(r"<h3>Compiles.*?<tbody>(.*?)</tbody>", section, re.S).group(1)
        assert compile_rows.count("<tr>") == s["compile_count"]
        for c in s["compiles"]:
            assert html.escape(c["location"]) in compile_rows
        for a in s["advice"]:
            assert html.escape(a["message"]) in section
    c = json.loads(cli("compare", *map(str, runs), "--format", "json").stdout)
    assert text_of(dom, "verdict") == c["verdict"]
    for w in c["warnings"]:
        assert html.escape(w["message"]) in dom


@needs_chromium
def test_one_run_has_no_compare_table(tmp_path):
    run = tmp_path / "item"
    shutil.copytree(JOURNALS / "item", run)
    page = tmp_path / "one.html"
    cli("report", str(run), "-o", str(page))
    dom, console = load(page)
    assert console == [] and 'id="compare"' not in dom and 'id="run-0"' in dom


def test_the_runs_own_text_never_becomes_markup():
    from neurondesk.core.events import run_events as ev
    from neurondesk.core.figures.series import chart_line
    from neurondesk.core.reduce.state import RunState
    from neurondesk.core.summary.build import run_summary
    from neurondesk.reports.html_report import ReportRun, render

    state = RunState()
    state.apply(ev.RunStarted(t=1.0, run_id="r<b>", command=["python", "<script>alert(1)</script>"]))
    state.apply(ev.Notice(t=2.0, level="warn", message='<img src=x onerror="alert(2)">'))
    page = render([ReportRun(run_summary(state), chart_line(state.parts.steps)[0], [], "/runs/<i>")])
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page and "&lt;img src=x" in page and "<b>" not in page and "<i>" not in page


def test_a_missing_run_is_one_line(tmp_path):
    p = subprocess.run([*ND, "report", str(tmp_path / "nope"), "-o", str(tmp_path / "r.html")],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.html").exists()
