"""The headless end prints the summary the recorder wrote (summary.json), not one the view builds
(issue 51 item 1): FollowSource.summary() reads it, and rebuilds one from the journal only where no
recorder finished the run (a lost recorder's). views/headless.py builds no Summary."""

from __future__ import annotations

import ast

from conftest import REPO

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.reports.summary_writer import to_json
from neurondesk.sources.follow import FollowSource
from neurondesk.store.rundir import RunPaths
from neurondesk.store.summary_files import write_atomic

T0 = 1_790_000_000.0


def _source(run_dir, finished: bool) -> FollowSource:
    """A FollowSource's summary() reads its state, run folder, fallback and final_summary only (no recorder here)."""
    state = RunState()
    state.apply(ev.RunStarted(t=T0, run_id="r1", command=["python", "train.py"]))
    state.apply(ev.StepEnded(t=T0 + 1, pid=7, step=0, duration_s=1.0))
    if finished:
        state.apply(ev.RunFinished(t=T0 + 2, exit_code=0))
    source = FollowSource.__new__(FollowSource)
    source.state, source.run_dir, source.fallback, source.final_summary = state, run_dir, None, None
    return source


def test_the_summary_is_the_one_the_recorder_wrote(tmp_path):
    source = _source(tmp_path, finished=True)
    written = run_summary(source.state)
    written.notices = ["said by the recorder only"]
    write_atomic(RunPaths(tmp_path).summary_json, to_json(written))
    assert source.summary().notices == ["said by the recorder only"]


def test_another_runs_summary_or_none_is_rebuilt_from_the_journal(tmp_path):
    source = _source(tmp_path, finished=True)
    assert source.summary().run_id == "r1" and source.summary().notices == []  # no summary.json: rebuilt
    other = run_summary(source.state)
    other.run_id, other.notices = "another run", ["not ours"]
    write_atomic(RunPaths(tmp_path).summary_json, to_json(other))
    assert source.summary().notices == []


def test_the_headless_view_builds_no_summary():
    tree = ast.parse((REPO / "neurondesk" / "views" / "headless.py").read_text())
    called = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)}
    assert "run_summary" not in called
