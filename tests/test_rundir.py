from datetime import datetime
from pathlib import Path

import pytest

from neurondesk.store.rundir import create_run_dir, default_run_root, make_run_id


def test_default_root_and_override():
    assert default_run_root({"NEURONDESK_HOME": "/srv/nd"}) == Path("/srv/nd/runs")
    root = default_run_root({})
    assert root.name == "runs" and "neurondesk" in str(root)


def test_run_id_from_the_given_time():
    rid = make_run_id(datetime(2026, 3, 4, 5, 6, 7))
    assert rid.startswith("20260304-050607-") and len(rid) == 20
    int(rid[-4:], 16)
    assert make_run_id(datetime(2026, 3, 4, 5, 6, 7), "beef") == "20260304-050607-beef"


def test_create_run_dir(tmp_path):
    paths = create_run_dir(tmp_path / "runs", "20260304-050607-beef")
    assert paths.dir.is_dir()
    assert [p.name for p in (paths.events, paths.summary_json, paths.summary_md, paths.stdout_log,
                             paths.stderr_log, paths.recorder_lock)] == [
        "events.jsonl",
        "summary.json",
        "summary.md",
        "stdout.log",
        "stderr.log",
        "recorder.lock",
    ]
    with pytest.raises(FileExistsError):
        create_run_dir(tmp_path / "runs", "20260304-050607-beef")
    with pytest.raises(ValueError, match="invalid run id"):
        create_run_dir(tmp_path / "runs", "../escape")
