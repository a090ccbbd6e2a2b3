"""The run index against a real SQLite file."""

import sqlite3
from datetime import UTC, datetime

import pytest

from neurondesk.core.summary.types import load_summary
from neurondesk.store.index import RunIndex, RunIndexError


def summary(run_id, started_at, **over):
    s = {
        "summary_version": 2,
        "run_id": run_id,
        "started_at": started_at,
        "elapsed_s": 612.0,
        "command": ["python", "train.py", "--seq-len", "512"],
        "exit_code": 0,
        "device": {"kind": "xla-cpu", "name": "CPU:0"},
        "precision": "fp32",
        "steps": 400,
        "first_compile_s": 41.0,
        "compile_count": 3,
        "compile_total_s": 95.5,
        "compiles": [{"step": 0, "duration_s": 41.0, "cause": "first"}],
        "recompiles_after_warmup": 1,
        "executions_per_step": 1.0,
        "steady": {
            "from_step": 5,
            "steps": 395,
            "step_time_s": 0.25,
            "step_time_p90_s": 0.3,
            "samples_per_s": 128.0,
            "tokens_per_s": 65536.0,
        },
        "data_wait_fraction": 0.02,
        "loss": {"first": 9.1, "last": 3.2, "steps_to_target": None},
        "cost": {
            "instance_type": "trn1.2xlarge",
            "price_per_hour": 1.34375,
            "price_source": "bundled table: VAN-2601 (2026-01-21), us-east-1",
            "total_usd": 0.2284,
            "per_1k_steps_steady_usd": 0.0933,
            "per_1k_steps_all_in_usd": 0.571,
            "per_million_tokens_usd": 0.0057,
            "compile_share": 0.156,
        },
    }
    s.update(over)
    return s


def test_record_and_list(tmp_path):
    idx = RunIndex(tmp_path / "runs.sqlite")
    idx.record(load_summary(summary("a", "2026-03-01T10:00:00+00:00")), tmp_path / "a")
    idx.record(load_summary(summary("b", "2026-03-02T10:00:00+00:00", exit_code=1, steps=7)), tmp_path / "b")
    rows = idx.list_runs()
    assert [r.id for r in rows] == ["b", "a"]  # newest first
    a = rows[1]
    assert a.command == "python train.py --seq-len 512"
    assert (a.device_kind, a.device_name, a.steps, a.exit_code) == ("xla-cpu", "CPU:0", 400, 0)
    assert (
        a.steady_samples_per_s,
        a.usd_per_1k_steps_steady,
        a.usd_per_1k_steps_all_in,
        a.usd_per_million_tokens,
        a.compile_total_s,
    ) == (128.0, 0.0933, 0.571, 0.0057, 95.5)
    assert a.run_dir == str(tmp_path / "a") and a.started_at == "2026-03-01T10:00:00+00:00"
    assert a.summary == load_summary(summary("a", "2026-03-01T10:00:00+00:00"))  # read back by the contract
    assert (rows[0].exit_code, rows[0].steps) == (1, 7)


def test_upsert_by_run_id(tmp_path):
    idx = RunIndex(tmp_path / "runs.sqlite")
    idx.record(load_summary(summary("a", "2026-03-01T10:00:00+00:00", exit_code=None)), tmp_path / "a")
    idx.record(load_summary(summary("a", "2026-03-01T10:00:00+00:00", exit_code=137)), tmp_path / "a")
    rows = idx.list_runs()
    assert len(rows) == 1 and rows[0].exit_code == 137 and rows[0].summary.exit_code == 137


def test_since_and_limit_across_time_zones(tmp_path):
    idx = RunIndex(tmp_path / "runs.sqlite")
    idx.record(load_summary(summary("early", "2026-03-01T10:00:00+00:00")), tmp_path / "e")
    idx.record(load_summary(summary("late", "2026-03-01T12:30:00+02:00")), tmp_path / "l")  # 10:30 UTC
    idx.record(load_summary(summary("later", "2026-03-01T11:00:00+00:00")), tmp_path / "x")
    since = datetime(2026, 3, 1, 10, 15, tzinfo=UTC)
    assert [r.id for r in idx.list_runs(since=since)] == ["later", "late"]
    assert [r.id for r in idx.list_runs(limit=1)] == ["later"]


def test_partial_summary_gives_null_columns(tmp_path):
    idx = RunIndex(tmp_path / "runs.sqlite")
    idx.record(load_summary({"summary_version": 2, "run_id": "c", "command": ["python", "t.py"], "exit_code": 2}),
               tmp_path / "c")
    (row,) = idx.list_runs()
    # read by the contract: a count the summary lacks is the struct's 0, a figure it lacks is null
    assert (row.command, row.steps, row.usd_per_1k_steps_steady, row.device_kind) == (
        "python t.py",
        0,
        None,
        None,
    )
    with pytest.raises(ValueError, match="run_id"):
        idx.record(load_summary({"summary_version": 2, "command": ["x"]}), tmp_path / "d")


def test_wal_mode_schema_version_and_reopen(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunIndex(path).record(load_summary(summary("a", "2026-03-01T10:00:00+00:00")), tmp_path / "a")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
    assert [r.id for r in RunIndex(path).list_runs()] == ["a"]  # reopening keeps rows, one version row
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunIndex(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(RunIndexError, match="newer"):
        RunIndex(path)


def test_corrupt_file_names_the_path(tmp_path):
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RunIndexError, match="runs.sqlite"):
        RunIndex(path)


def test_index_file_is_private(tmp_path):
    idx = RunIndex(tmp_path / "runs.sqlite")
    idx.list_runs()
    assert (tmp_path / "runs.sqlite").stat().st_mode & 0o777 == 0o600


def _nd(home, *args):
    import subprocess
    import sys

    from conftest import REPO, base_env

    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=base_env(home), timeout=60)


def test_rows_that_are_not_json_or_have_wrong_types_are_skipped_and_counted(tmp_path):
    idx = RunIndex(tmp_path / "runs.sqlite")
    for rid, day in (("good", 1), ("notjson", 2), ("types", 3), ("col", 4)):
        idx.record(load_summary(summary(rid, f"2026-03-0{day}T10:00:00+00:00")), tmp_path / rid)
    with sqlite3.connect(tmp_path / "runs.sqlite") as conn:
        conn.execute("UPDATE runs SET summary_json = '{not json' WHERE id = 'notjson'")
        conn.execute("UPDATE runs SET summary_json = ? WHERE id = 'types'",
                     ('{"run_id": "types", "device": "cpu", "cost": [1], "steps": "many"}',))
        conn.execute("UPDATE runs SET steps = 'lots' WHERE id = 'col'")
    rows = idx.list_runs(limit=-1)
    assert [r.id for r in rows] == ["good"] and idx.skipped == 3


def test_history_and_the_cost_board_skip_unreadable_rows_saying_so_once(tmp_path):
    idx = RunIndex(tmp_path / "runs" / "runs.sqlite")
    idx.record(load_summary(summary("good", "2026-03-01T10:00:00+00:00")), tmp_path / "runs" / "good")
    idx.record(load_summary(summary("bad", "2026-03-02T10:00:00+00:00")), tmp_path / "runs" / "bad")
    with sqlite3.connect(tmp_path / "runs" / "runs.sqlite") as conn:
        conn.execute("UPDATE runs SET summary_json = '[1, 2' WHERE id = 'bad'")
    for args in (("history",), ("history", "--group-by", "week")):
        p = _nd(tmp_path, *args)
        assert p.returncode == 0, p.stderr
        assert p.stderr.count("1 unreadable row(s) in the run index") == 1 and "neurondesk reindex" in p.stderr
    assert "good" in _nd(tmp_path, "history").stdout


def test_a_busy_lock_is_waited_for_and_the_row_is_not_lost(tmp_path, monkeypatch):
    import threading

    from neurondesk.store import index as index_mod

    monkeypatch.setattr(index_mod, "BUSY_TIMEOUT_S", 0.05)  # a try gives up fast; the tries go on
    idx = RunIndex(tmp_path / "runs.sqlite")
    holder = sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    tried = threading.Event()
    real_connect = idx._connect

    def counting_connect():
        tried.set()
        return real_connect()

    monkeypatch.setattr(idx, "_connect", counting_connect)
    t = threading.Thread(target=lambda: (tried.wait(10), __import__("time").sleep(0.5), holder.rollback()))
    t.start()
    idx.record(load_summary(summary("a", "2026-03-01T10:00:00+00:00")), tmp_path / "a")
    t.join()
    holder.close()
    assert [r.id for r in idx.list_runs()] == ["a"]


def test_reindex_rebuilds_from_summaries_and_journals(tmp_path):
    import json

    from neurondesk.core.events.run_events import RunFinished, RunStarted, StepEnded
    from neurondesk.store.journal import JournalWriter

    runs = tmp_path / "runs"
    (runs / "20260301-100000-aaaa").mkdir(parents=True)
    (runs / "20260301-100000-aaaa" / "summary.json").write_text(
        json.dumps(summary("20260301-100000-aaaa", "2026-03-01T10:00:00+00:00")))
    (runs / "20260302-100000-bbbb").mkdir()
    w = JournalWriter(runs / "20260302-100000-bbbb" / "events.jsonl")
    w.write(RunStarted(t=1772445600.0, run_id="20260302-100000-bbbb", command=["python", "x.py"]))
    w.write(StepEnded(t=1772445601.0, pid=1, step=0, duration_s=0.5))
    w.write(RunFinished(t=1772445602.0, exit_code=0))
    w.close()
    (runs / "20260303-100000-cccc").mkdir()
    (runs / "20260303-100000-cccc" / "summary.json").write_text("{broken")
    (runs / "runs.sqlite").write_bytes(b"this is not a database" * 100)
    p = _nd(tmp_path, "reindex")
    assert p.returncode == 0, p.stderr
    assert "indexed 2 run(s)" in p.stdout and "1 from their journals" in p.stdout
    assert "skipped 20260303-100000-cccc" in p.stderr and "moved to" in p.stderr
    rows = RunIndex(runs / "runs.sqlite").list_runs()
    assert [r.id for r in rows] == ["20260302-100000-bbbb", "20260301-100000-aaaa"]
    assert rows[0].steps == 1
