"""``--mlflow URI`` takes every tracking URI form MLflow takes, or refuses one in one line before the
training starts, and never writes anywhere the user did not name (issue 45 item 3: ``file:DIR`` made a
folder literally named ``file:DIR`` in the current directory). Real runs, read back by a real MlflowClient."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import base_env
from sink_readers import mlflow_run

from neurondesk.sinks.base import SinkError
from neurondesk.sinks.frames import PREFIX
from neurondesk.sinks.uris import mlflow_target, password_warning


def test_each_form_is_taken_absolute_or_refused_in_one_line(tmp_path):
    t = mlflow_target("file:store", {}, tmp_path)
    assert (t.uri, t.store, t.artifacts, t.file_store) == ((tmp_path / "store").as_uri(), tmp_path / "store", None, True)
    assert mlflow_target("file:///abs/store", {}, tmp_path).uri == "file:///abs/store"
    assert mlflow_target("file://localhost/abs/store", {}, tmp_path).store == Path("/abs/store")
    db = mlflow_target("sqlite:///sub/m.db", {}, tmp_path)
    assert (db.uri, db.artifacts) == (f"sqlite:///{tmp_path / 'sub' / 'm.db'}", tmp_path / "sub" / "artifacts")
    assert mlflow_target("sqlite:////abs/m.db", {}, tmp_path).uri == "sqlite:////abs/m.db"
    folder = mlflow_target("runs", {}, tmp_path)
    assert (folder.uri, folder.artifacts) == (f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}", tmp_path / "runs" / "artifacts")
    server = mlflow_target("https://nd:pw@mlflow.example.com:5000/?token=t", {}, tmp_path)
    assert server.uri == "https://nd:pw@mlflow.example.com:5000/?token=t"  # MLflow gets all of it
    assert server.shown == server.look == "https://mlflow.example.com:5000/"  # what is said, none of it
    assert mlflow_target("databricks", {}, tmp_path).uri == "databricks"
    assert mlflow_target("databricks://profile", {}, tmp_path).uri == "databricks://profile"
    assert mlflow_target("", {"MLFLOW_TRACKING_URI": "sqlite:///e.db"}, tmp_path).uri == f"sqlite:///{tmp_path / 'e.db'}"
    refused = {"file://otherhost/x": "file:///ABSOLUTE/DIR", "sqlite://": "in-memory", "sqlite:///:memory:": "in-memory",
               "postgresql+psycopg2://u:secretpw@db/x": "mlflow server", "s3://bucket/x": "s3: is no MLflow tracking URI",
               "runs:v2": "./runs:v2", "": "MLFLOW_TRACKING_URI, which is not set", "http:///x": "no host"}
    for text, words in refused.items():
        with pytest.raises(SinkError) as err:
            mlflow_target(text, {}, tmp_path)
        line = str(err.value)
        assert words in line and "\n" not in line and "secretpw" not in line, (text, line)
    with pytest.raises(SinkError, match="MLFLOW_ALLOW_FILE_STORE=false refuses"):
        mlflow_target("file:store", {"MLFLOW_ALLOW_FILE_STORE": "false"}, tmp_path)
    assert "MLFLOW_TRACKING_PASSWORD" in password_warning("http://nd:pw@h:5000/")
    assert password_warning("http://h:5000/") is None and password_warning("store") is None


# The workload: holds until MLflow holds the sink's run (a file store's run folder, a row in an SQLite store's
# runs), at most 240 s: MLflow's first open of a store (imports, SQLite migrations) can outlast the recorder's
# bounded wait at the end on a loaded machine; the end is then written whole
HOLD = """
import glob, sqlite3, sys, time
def there():
    if sys.argv[1].endswith(".db"):
        try:
            return sqlite3.connect(sys.argv[1]).execute("select count(*) from runs").fetchone()[0] > 0
        except sqlite3.Error:
            return False
    return bool(glob.glob(sys.argv[1] + "/*/*/meta.yaml"))
end = time.monotonic() + 240
while not there() and time.monotonic() < end:
    time.sleep(0.2)
print("held", there())
"""


def _run(work: Path, tmp: Path, mlflow: list[str], store: Path, env: dict[str, str] | None = None):
    """A run from ``work`` (the current directory of the command) of a workload that ends once ``store`` has the run."""
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(tmp / "run"),
                           "--price-per-hour", "1", *mlflow, "--", sys.executable, "-c", HOLD, str(store)],
                          capture_output=True, text=True, cwd=work, env=env or base_env(tmp), timeout=600)


def _sink_lines(run_dir: Path) -> list[str]:
    events = map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
    return [e["message"] for e in events if e.get("kind") == "notice" and e.get("source") == "sinks"]


def test_a_file_store_is_written_where_named_and_read_back_by_mlflow(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    p = _run(work, tmp_path, ["--mlflow", "file:store"], work / "store")
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(x.name for x in work.iterdir()) == ["store"]  # no folder named "file:store", nothing else
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow >= 3.13 reads a file store only so
    got = mlflow_run(f"file:{work / 'store'}")
    assert got["run"].info.run_name == summary["run_id"] and got["run"].info.status == "FINISHED"
    assert got["metrics"][PREFIX + "steps"] == summary["steps"] and "summary.json" in got["artifacts"]
    assert any(f"mlflow ui --backend-store-uri {(work / 'store').as_uri()}" in line for line in _sink_lines(tmp_path / "run"))


def test_mlflow_alone_takes_the_tracking_uri_of_the_environment_and_a_foreign_scheme_is_refused(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = {**base_env(tmp_path), "MLFLOW_TRACKING_URI": "sqlite:///db/m.db"}
    p = _run(work, tmp_path, ["--mlflow"], work / "db" / "m.db", env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(str(x.relative_to(work)) for x in work.iterdir()) == ["db"]  # no ./mlruns: artifacts beside the db
    got = mlflow_run(f"sqlite:///{work / 'db' / 'm.db'}")
    assert got["run"].info.artifact_uri.startswith((work / "db" / "artifacts").as_uri())
    assert "summary.json" in got["artifacts"]
    refused = _run(work, tmp_path / "other", ["--mlflow", "s3://bucket/runs"], work)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("neurondesk: --mlflow s3://bucket/runs: s3: is no MLflow tracking URI")
    assert not (tmp_path / "other" / "run").exists()  # before anything ran
