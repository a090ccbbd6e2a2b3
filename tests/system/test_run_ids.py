"""Run ids are unique whatever the folder is called (issue 24, item 8): runs in a/run and b/run get
different ids and keep an index row each; the same folder run again keeps its id."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, base_env

from neurondesk.store.index import RunIndex
from neurondesk.store.run_ids import run_id_for


def nd(home, *args):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=base_env(home), timeout=120)


def run_in(home, run_dir, *extra):
    p = nd(home, "run", "--headless", "--price-per-hour", "1", "--run-dir", str(run_dir), *extra, "--",
           sys.executable, "-c", f"print('in', {str(run_dir)!r})")
    assert p.returncode == 0, p.stderr
    return json.loads((run_dir / "summary.json").read_text())["run_id"]


def test_runs_in_folders_of_the_same_name_get_their_own_ids_and_rows(tmp_path):
    home = tmp_path / "home"
    a, b, c = tmp_path / "a" / "run", tmp_path / "b" / "run", tmp_path / "c" / "run"
    ids = [run_in(home, a), run_in(home, b), run_in(home, c)]
    assert ids[0] == "run"  # the first keeps its folder's name
    assert len(set(ids)) == 3 and all(i.startswith("run-") for i in ids[1:]), ids
    rows = {r.id: r.run_dir for r in RunIndex(home / "runs" / "runs.sqlite").list_runs()}
    assert rows == {ids[0]: str(a), ids[1]: str(b), ids[2]: str(c)}
    history = json.loads(nd(home, "history", "--format", "json").stdout)
    assert sorted(r["id"] for r in history) == sorted(ids)
    # the same folder again: the same id, its row replaced, the others kept
    assert run_in(home, b, "--force") == ids[1]
    assert len(RunIndex(home / "runs" / "runs.sqlite").list_runs()) == 3
    # each id finds its own run
    for run_id, d in zip(ids, (a, b, c), strict=True):
        cmp_ = nd(home, "compare", ids[0], run_id, "--format", "json")
        assert cmp_.returncode == 0, cmp_.stderr
        assert [r["run_id"] for r in json.loads(cmp_.stdout)["runs"]] == [ids[0], run_id]
        assert d.is_dir()


def test_a_folder_under_the_run_root_is_named_by_its_folder(tmp_path):
    root = tmp_path / "runs"
    (root / "20260101-120000-ab12").mkdir(parents=True)
    assert run_id_for(root / "20260101-120000-ab12", root) == "20260101-120000-ab12"
    elsewhere = tmp_path / "x" / "20260101-120000-ab12"
    elsewhere.mkdir(parents=True)
    named = run_id_for(elsewhere, root)  # a run under the root already has that name
    assert named.startswith("20260101-120000-ab12-") and named == run_id_for(elsewhere, root)
