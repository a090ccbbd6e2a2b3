"""The cost board (`neurondesk history --group-by`), pure and through the CLI on a real SQLite index."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from conftest import REPO, base_env

from neurondesk.core.summary.board import cost_board, parse_since, period_of
from neurondesk.core.summary.types import Summary, load_summary
from neurondesk.store.index import RunIndex


def summary(run_id, started_at, kind="neuron", instance="trn1.2xlarge", steps=1000, total=1.0, steady=0.5,
            tokens=0.02, share=0.5, elapsed=100.0) -> Summary:
    return load_summary({"summary_version": 2, "run_id": run_id, "started_at": started_at, "command": ["python", "train.py"], "steps": steps,
            "elapsed_s": elapsed, "exit_code": 0, "device": {"kind": kind, "name": kind},
            "steady": {"samples_per_s": 10.0},
            "cost": {"instance_type": instance, "total_usd": total, "per_1k_steps_steady_usd": steady,
                     "per_1k_steps_all_in_usd": None, "per_million_tokens_usd": tokens, "compile_share": share}})


RUNS = [
    # week 2026-W48 (Mon 23 Nov - Sun 29 Nov), two trn1 runs on two days
    summary("a", "2026-11-23T10:00:00+00:00", steps=1000, total=2.0, steady=0.5, tokens=0.02, share=0.5, elapsed=100),
    summary("b", "2026-11-25T10:00:00+00:00", steps=3000, total=3.0, steady=0.3, tokens=0.01, share=0.1, elapsed=300),
    # same week, a GPU run; and one without a price
    summary("c", "2026-11-24T10:00:00+00:00", kind="cuda", instance="g5.xlarge", steps=500, total=1.5, steady=1.0),
    summary("d", "2026-11-24T11:00:00+00:00", kind="cuda", instance="g5.xlarge", steps=500, total=None,
            steady=None, tokens=None, share=0.0, elapsed=50),
    # next week
    summary("e", "2026-11-30T09:00:00+00:00", steps=200, total=0.4),
]


def test_weekly_board_per_device():
    board = cost_board(RUNS, "week")
    assert [(r["period"], r["device"], r["runs"]) for r in board] == [
        ("2026-W49", "neuron @ trn1.2xlarge", 1),
        ("2026-W48", "cuda @ g5.xlarge", 2),
        ("2026-W48", "neuron @ trn1.2xlarge", 2),
    ]
    trn = board[2]
    assert trn["steps"] == 4000 and trn["cost_usd"] == pytest.approx(5.0)
    assert trn["per_1k_steps_all_in_usd"] == pytest.approx(5.0 / 4000 * 1000)
    assert trn["per_1k_steps_steady_usd"] == pytest.approx((0.5 * 1000 + 0.3 * 3000) / 4000)  # step-weighted
    assert trn["per_million_tokens_usd"] == pytest.approx((0.02 * 1000 + 0.01 * 3000) / 4000)
    assert trn["compile_share"] == pytest.approx((0.5 * 100 + 0.1 * 300) / 400)  # compile time / wall time
    gpu = board[1]
    # the unpriced run counts as a run and in the compile share, not in the dollar figures
    assert (gpu["runs"], gpu["priced_runs"], gpu["steps"]) == (2, 1, 1000)
    assert gpu["per_1k_steps_all_in_usd"] == pytest.approx(1.5 / 500 * 1000)
    assert gpu["per_1k_steps_steady_usd"] == pytest.approx(1.0)
    assert gpu["compile_share"] == pytest.approx((0.5 * 100 + 0.0 * 50) / 150)


def test_daily_periods_are_utc_dates_and_since_spans():
    assert [r["period"] for r in cost_board(RUNS, "day")] == [
        "2026-11-30", "2026-11-25", "2026-11-24", "2026-11-23"]
    assert period_of("2026-11-30T00:30:00+02:00", "day") == "2026-11-29"  # UTC, not the local date
    assert period_of("2027-01-01T10:00:00+00:00", "week") == "2026-W53"  # ISO week year
    assert cost_board(RUNS, None)[0]["period"] == "all"
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert parse_since("7d", now) == datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    assert parse_since("12h", now) == datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    assert parse_since("2w", now) == datetime(2026, 11, 16, 12, 0, tzinfo=UTC)
    assert parse_since("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="give a span like 7d"):
        parse_since("last tuesday", now)
    with pytest.raises(ValueError, match="--group-by 'month'"):
        cost_board(RUNS, "month")


def history(home, *args):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", "history", *args], capture_output=True,
                          text=True, timeout=60, env=base_env(home), cwd=REPO)


def test_history_board_from_the_sqlite_index(tmp_path):
    index = RunIndex(tmp_path / "runs" / "runs.sqlite")
    for s in RUNS:
        index.record(s, tmp_path / "runs" / s.run_id)
    p = history(tmp_path, "--group-by", "week", "--format", "json")
    assert p.returncode == 0, p.stderr
    board = json.loads(p.stdout)  # the figures worked out by hand from RUNS, as in test_weekly_board_per_device
    assert [(r["period"], r["device"], r["runs"], r["priced_runs"], r["steps"]) for r in board] == [
        ("2026-W49", "neuron @ trn1.2xlarge", 1, 1, 200),
        ("2026-W48", "cuda @ g5.xlarge", 2, 1, 1000),
        ("2026-W48", "neuron @ trn1.2xlarge", 2, 2, 4000),
    ]
    approx = pytest.approx
    assert [r["cost_usd"] for r in board] == approx([0.4, 1.5, 5.0])
    assert [r["per_1k_steps_all_in_usd"] for r in board] == approx([0.4 / 200 * 1000, 1.5 / 500 * 1000, 1.25])
    assert [r["per_1k_steps_steady_usd"] for r in board] == approx([0.5, 1.0, (0.5 * 1000 + 0.3 * 3000) / 4000])
    assert [r["per_million_tokens_usd"] for r in board] == approx([0.02, 0.02, (0.02 * 1000 + 0.01 * 3000) / 4000])
    assert [r["compile_share"] for r in board] == approx([0.5, 50 / 150, (0.5 * 100 + 0.1 * 300) / 400])
    since = history(tmp_path, "--group-by", "day", "--since", "2026-11-25", "--format", "csv").stdout.splitlines()
    assert since[0].startswith("period,device,runs,steps,cost_usd,per_1k_steps_steady_usd")
    assert [line.split(",")[0] for line in since[1:]] == ["2026-11-30", "2026-11-25"]
    text = history(tmp_path, "--group-by", "week").stdout
    assert text.splitlines()[0].split()[:4] == ["period", "(UTC)", "device", "runs"]
    assert "2026-W48" in text and "$1.25" in text  # trn1 W48 all-in $/1k steps
    listing = json.loads(history(tmp_path, "--format", "json", "--limit", "2").stdout)
    assert [r["id"] for r in listing] == ["e", "b"]
    bad = history(tmp_path, "--since", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("neurondesk: --since 'soon': give a span like 7d")


def test_the_boards_compile_share_is_of_the_wall_time_for_unpriced_runs_too():
    # an unpriced run has no compile share of the cost (None): the board still counts its wall-time share
    # (figures.compile_share), weighted by elapsed time like the others
    from neurondesk.core.events import run_events as ev
    from neurondesk.core.reduce.state import RunState
    from neurondesk.core.summary.build import run_summary

    def run(run_id: str, price: float | None) -> Summary:
        s = RunState()
        s.apply(ev.RunStarted(t=0.0, run_id=run_id, command=["python", "train.py"], warmup_steps=1,
                              price_per_hour=price, instance_type="trn1.2xlarge"))
        s.apply(ev.ProcessAttached(t=0.1, pid=5))
        s.apply(ev.CompileFinished(t=30.0, source="probe", duration_s=30.0, pid=5, step=0))
        for i in range(10):
            s.apply(ev.StepEnded(t=30.0 + 7.0 * i, pid=5, step=i, duration_s=7.0 if i else 30.0, compiles=int(i == 0)))
        return run_summary(s)

    unpriced, priced = run("u", None), run("p", 1.0)
    assert unpriced.cost.compile_share is None and unpriced.figures.compile_share == pytest.approx(30 / 93)
    for runs in ([unpriced], [unpriced, priced]):
        (row,) = cost_board(runs, None)
        assert row["compile_share"] == pytest.approx(30 / 93)
