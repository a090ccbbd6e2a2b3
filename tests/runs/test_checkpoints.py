"""Checkpoints seen with no code change (issue 46 item 3, the interval advice of item 5): the probe's
timing of torch.save / torch.load and torch.distributed.checkpoint on real runs, against what the
script measures itself; a save that raises keeps the user's error; the reducer's job seconds (a save
on several ranks at once counted once); Young/Daly's interval."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from neurondesk.collectors.probe_messages import decode_probe_line
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.checkpoint_events import CheckpointOp, LongCollective
from neurondesk.core.figures.checkpoint_figures import checkpoint_figures
from neurondesk.core.figures.run_figures import FIGURES, run_figures
from neurondesk.core.findings.checkpoint_advice import checkpoint_advice, young_daly_s
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.reduce.checkpoints import CheckpointReducer, Spans
from neurondesk.core.reduce.state import RunState
from neurondesk.core.view.run_view import view_of
from neurondesk.reports import fmt
from neurondesk.views.headless import status_line
from tests.conftest import REAL_RUN_TIMEOUT_S, REPO, base_env, neurondesk_run

SCRIPTS = REPO / "tests" / "checkpoint_scripts"


def save(t: float, d: float, pid: int = 1, step: int = 10, **kw) -> CheckpointOp:
    return CheckpointOp(t=t, pid=pid, op=kw.pop("op", "save"), api=kw.pop("api", "torch.save"), duration_s=d,
                        step=step, **kw)


# ---------------------------------------------------------------- the reducer
def test_a_save_on_two_ranks_at_once_is_counted_once_as_wall_time():
    ck = CheckpointReducer()
    ck.on_checkpoint(save(102.0, 2.0, pid=1, rank=0, bytes=100))  # 100..102
    ck.on_checkpoint(save(102.5, 2.0, pid=2, rank=1, bytes=100))  # 100.5..102.5: the same save
    assert ck.save_s == pytest.approx(2.5) and ck.saves == 1 and ck.rank_saves == 2
    assert ck.bytes_written == 200 and ck.write_rate == pytest.approx(200 / 2.5)
    ck.on_checkpoint(save(131.0, 1.0, pid=1, step=20))  # another save, 30 s later, on one rank
    assert ck.save_s == pytest.approx(3.5) and ck.saves == 2
    assert (ck.last_save_step, ck.last_save_t) == (20, 131.0)
    assert ck.interval_s == pytest.approx(30.0)


def test_spans_merge_a_span_that_bridges_two_and_keep_the_union():
    s = Spans()
    for a, b in ((0, 1), (5, 6), (10, 11), (0.5, 5.5)):
        s.add(a, b)
    assert s.total_s == pytest.approx(7.0) and len(s) == 2 and s.starts == [0, 10]


def test_another_ranks_barrier_during_a_save_is_its_wait_and_one_far_from_any_save_counts_nothing():
    ck = CheckpointReducer()
    ck.waits.on_call(LongCollective(t=50.0, pid=2, op="barrier", duration_s=5.0, rank=1))  # far from any save
    ck.waits.on_call(LongCollective(t=100.003, pid=2, op="barrier", duration_s=0.5, rank=1))  # the barrier before
    ck.on_checkpoint(save(101.0, 1.0, pid=1, rank=0))  # rank 0 saves 100..101
    ck.waits.on_call(LongCollective(t=101.02, pid=2, op="barrier", duration_s=0.97, rank=1))  # 100.05..101.02
    ck.waits.on_call(LongCollective(t=100.8, pid=1, op="all_reduce", duration_s=0.5, rank=0))  # the saver's own
    assert ck.wait_s == pytest.approx(0.97)
    # a call that reached the recorder before the save is matched when the save arrives; the checkpoint's
    # longest wait counts (rank 2's 1.2 s from the save's start, not rank 1's 0.6 s beside it; rank 1's
    # barrier before the save, ending 3 ms into it, adds nothing to its 0.97 s)
    ck.waits.on_call(LongCollective(t=201.2, pid=3, op="all_reduce", duration_s=3.0, rank=2))  # 198.2..201.2
    ck.waits.on_call(LongCollective(t=200.6, pid=2, op="barrier", duration_s=0.6, rank=1))
    ck.waits.on_call(LongCollective(t=230.0, pid=2, op="barrier", duration_s=0.5, rank=1))  # 29 s after: nothing
    ck.waits.on_call(LongCollective(t=201.3, pid=2, op="barrier", duration_s=0.1, rank=1))  # began after the save
    ck.on_checkpoint(save(201.0, 1.0, pid=1, rank=0, step=20))  # 200..201
    assert ck.wait_s == pytest.approx(0.97 + 1.2)
    assert "the other ranks waited 2.17 s" in checkpoint_figures(ck, 300.0, 300.0).words


def test_a_failed_save_is_counted_and_timed_and_leaves_the_last_good_checkpoint():
    ck = CheckpointReducer()
    ck.on_checkpoint(save(10.0, 1.0, step=5, bytes=50))
    ck.on_checkpoint(save(20.0, 0.5, step=9, ok=False, error="OSError: [Errno 28] No space left on device"))
    assert ck.failed_saves == 1 and ck.saves == 1 and ck.save_s == pytest.approx(1.5)
    assert (ck.last_save_step, ck.last_error) == (5, "OSError: [Errno 28] No space left on device")


def test_an_async_save_blocks_for_its_call_and_is_the_last_checkpoint_once_written():
    ck = CheckpointReducer()
    ck.on_checkpoint(save(10.0, 0.1, step=7, api="dcp.async_save", pending=True))
    assert ck.save_s == pytest.approx(0.1) and ck.last_save_step is None  # not on disk yet
    ck.on_checkpoint(save(12.0, 2.1, step=7, api="dcp.async_save", op="async_done", bytes=1000))
    assert ck.save_s == pytest.approx(0.1) and ck.async_background_s == pytest.approx(2.1)
    assert (ck.last_save_step, ck.last_save_t, ck.bytes_written) == (7, 12.0, 1000)


def test_process_failures_within_a_minute_are_one_disruption():
    ck = CheckpointReducer()
    ck.on_failure(ev.ProcessFailed(t=100.0, pid=1, error="RuntimeError: x"))
    ck.on_failure(ev.RankExited(t=101.0, rank=1, exit_code=1))  # the same failure, torn down with it
    ck.on_failure(ev.RankExited(t=102.0, rank=2, exit_code=0))  # a clean exit: none
    ck.on_failure(ev.ProcessFailed(t=500.0, pid=3, error="RuntimeError: y"))
    assert ck.failures == 2


# ---------------------------------------------------------------- Young/Daly
def _job(interval: float, cost: float, saves: int, failures: int) -> CheckpointReducer:
    ck = CheckpointReducer()
    for i in range(saves):
        ck.on_checkpoint(save(i * interval + cost, cost, step=i))
    for i in range(failures):
        ck.on_failure(ev.ProcessFailed(t=i * 1000.0, pid=1, error="x"))
    return ck


def test_young_daly_says_a_far_interval_and_stays_quiet_near_it_or_without_failures():
    assert young_daly_s(2.0, 1000.0) == pytest.approx(63.2455, rel=1e-4)
    far = checkpoint_advice(_job(10.0, 2.0, 10, 1), elapsed_s=1000.0)  # every 10 s, best ~63 s
    assert far is not None and far.off and far.best_interval_s == pytest.approx(63.2455, rel=1e-3)
    assert "less often" in far.words and far.loss_best < far.loss_now
    near = checkpoint_advice(_job(60.0, 2.0, 10, 1), elapsed_s=1000.0)
    assert near is not None and not near.off and "less often" not in near.words
    assert checkpoint_advice(_job(10.0, 2.0, 10, 0), elapsed_s=1000.0) is None  # no failure rate to base it on


def test_the_advice_reaches_the_figures_and_the_diagnostics():
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "t.py"]))
    for i in range(10):
        state.apply(save(i * 10.0 + 2.0, 2.0, step=i * 10))
    state.apply(ev.ProcessFailed(t=500.0, pid=1, error="RuntimeError: rank died"))
    state.apply(ev.Notice(t=1000.0, level="info", message="end"))
    f = run_figures(state, 1000.0)
    assert f.checkpoint_advice is not None and f.checkpoint_advice.off
    assert f.checkpoint_saves == 10 and f.checkpoint_save_s == pytest.approx(20.0)
    assert f.checkpoint_last == "step 90, 15 min ago"
    assert [d.message for d in diagnostics(state) if d.kind == "checkpoint-interval"] == [f.checkpoint_advice.words]
    assert "last checkpoint step 90, 15 min ago" in status_line(view_of(state, 1000.0))


def test_a_checkpoint_message_decodes_and_an_unknown_op_is_refused():
    line = json.dumps({"kind": "checkpoint", "t": 5.0, "pid": 3, "op": "save", "api": "torch.save",
                       "duration_s": 0.5, "step": 4, "rank": None, "bytes": 12, "ok": True}).encode() + b"\n"
    e = decode_probe_line(line, 6.0)
    assert isinstance(e, CheckpointOp) and e.start_t == 4.5 and e.bytes == 12
    from neurondesk.collectors.probe_messages import out_of_range

    assert "not one of" in out_of_range(save(5.0, 0.5, op="erase"), 6.0)


# ---------------------------------------------------------------- real runs
def _timing(stdout: str, mark: str) -> list[dict]:
    return [json.loads(line.split(":", 1)[1]) for line in stdout.splitlines() if line.startswith(mark)]


def test_a_real_run_times_its_saves_as_the_script_does_and_a_failed_save_keeps_its_error(tmp_path):
    out_alone, out_nd = tmp_path / "alone", tmp_path / "nd"
    out_alone.mkdir(), out_nd.mkdir()
    script, args = SCRIPTS / "save_every.py", ["60", "20"]
    env = base_env(tmp_path)
    alone = subprocess.run([sys.executable, str(script), str(out_alone), *args], capture_output=True, text=True,
                           timeout=REAL_RUN_TIMEOUT_S, env=env)
    run = neurondesk_run(tmp_path, [str(out_nd), *args], workload=script, env=env)
    assert run.returncode == alone.returncode == 0, run.stderr[-2000:]
    stdout = (run.run_dir / "stdout.log").read_text()
    failed = [line for line in stdout.splitlines() if line.startswith("save failed:")]
    assert failed == [line.replace(str(out_alone), str(out_nd)) for line in alone.stdout.splitlines()
                      if line.startswith("save failed:")] and len(failed) == 1  # the same error, unchanged
    (mine,) = _timing(stdout, "ckpt-timing:")
    f = run.summary["figures"]
    assert f["checkpoint_saves"] == mine["saves"] == 3 and f["checkpoint_failed"] == 1
    assert f["checkpoint_bytes"] == mine["bytes"]
    ops = [e for e in run.events if e["kind"] == "checkpoint"]
    good = sum(e["duration_s"] for e in ops if e["op"] == "save" and e["ok"])
    assert good == pytest.approx(mine["save_s"], rel=0.3)  # the probe's time of the saves, the script's own
    assert f["checkpoint_load_s"] == pytest.approx(mine["load_s"], rel=0.3)
    assert f["checkpoint_last_step"] == 60 and [e["step"] for e in ops if e["op"] == "save"] == [20, 40, 60, 60]
    md = (run.run_dir / "summary.md").read_text()
    for info in FIGURES:  # the report shows core's values, each row of them now that there are checkpoints
        if info.name == "checkpoint_wait_s":  # one process: no other rank waited, no row
            assert f["checkpoint_wait_s"] == 0 and f"| {info.label} |" not in md
        elif info.name.startswith("checkpoint"):
            assert f"| {info.label} | {fmt.value_text(f[info.name], info.kind)} |" in md, info.name
    bad = [e for e in ops if not e["ok"]]
    assert len(bad) == 1 and bad[0]["error"].startswith(failed[0].split()[2] + ": ")  # its type, then its words


def test_a_dcp_save_async_save_and_load_on_two_gloo_ranks(tmp_path):
    out = tmp_path / "ckpt"
    out.mkdir()
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--",
           sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(SCRIPTS / "dcp_ranks.py"), str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
    ops = [e for e in events if e["kind"] == "checkpoint"]
    apis = sorted((e["api"], e["op"]) for e in ops)
    assert apis == sorted([("dcp.save", "save")] * 2 + [("dcp.async_save", "save")] * 2
                          + [("dcp.async_save", "async_done")] * 2 + [("dcp.load", "load")] * 2)  # no inner torch.save
    summary = json.loads((run_dir / "summary.json").read_text())["figures"]
    saves = [e for e in ops if e["api"] == "dcp.save"]
    assert summary["checkpoint_saves"] == 2  # the sync save and the async one, each on two ranks at once
    rank_sum = sum(e["duration_s"] for e in ops if e["op"] == "save")
    assert summary["checkpoint_save_s"] < rank_sum  # the job's wall time, not the sum over ranks
    assert summary["checkpoint_save_s"] >= max(e["duration_s"] for e in saves)
    on_disk = sum(f.stat().st_size for f in (out / "sync").iterdir()) + sum(f.stat().st_size for f in (out / "async").iterdir())
    assert summary["checkpoint_bytes"] == on_disk and summary["checkpoint_last_step"] == 15
    mine = _timing((run_dir / "stdout.log").read_text(), "dcp-timing:")
    assert len(mine) == 2
    for rank in mine:
        (probe,) = [e for e in saves if e["rank"] == rank["rank"]]
        assert probe["duration_s"] == pytest.approx(rank["save_s"], rel=0.3)


def test_another_ranks_wait_for_a_save_on_two_gloo_ranks_is_its_own_timing_of_the_barrier(tmp_path):
    out = tmp_path / "ckpt"
    out.mkdir()
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--",
           sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(SCRIPTS / "save_wait.py"), str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=base_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line]
    saves = [e for e in events if e["kind"] == "checkpoint"]
    assert [(e["op"], e["rank"]) for e in saves] == [("save", 0)] * 3
    (mine,) = _timing((run_dir / "stdout.log").read_text(), "wait-timing:")
    summary = json.loads((run_dir / "summary.json").read_text())["figures"]
    assert summary["checkpoint_wait_s"] > 0
    assert summary["checkpoint_wait_s"] == pytest.approx(sum(mine["barrier_s"]), rel=0.3)  # rank 1's own timing
    assert f"the other ranks waited {summary['checkpoint_wait_s']:.2f} s" in summary["checkpoints"]
    md = (run_dir / "summary.md").read_text()
    assert f"| other ranks' wait for checkpoints | {fmt.value_text(summary['checkpoint_wait_s'], 's')} |" in md


def test_a_transformers_trainer_checkpoint_is_one_save_and_its_resume_a_load(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "out"
    run = neurondesk_run(tmp_path, [str(out)], workload=SCRIPTS / "hf_trainer.py")
    assert run.returncode == 0, run.stderr[-3000:]
    ops = [e for e in run.events if e["kind"] == "checkpoint"]
    saves = [e for e in ops if e["op"] == "save"]
    folders = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert [p.name for p in folders] == ["checkpoint-5", "checkpoint-10", "checkpoint-12", "checkpoint-14"]
    # one save a checkpoint, its own torch.save calls inside it never counted again
    assert [e["api"] for e in saves] == ["transformers.Trainer._save_checkpoint"] * 4
    on_disk = [sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in folders]
    assert [e["bytes"] for e in saves] == on_disk
    assert [e["api"] for e in ops if e["op"] == "load"][0] == "transformers.Trainer._load_from_checkpoint"
    assert run.summary["figures"]["checkpoint_saves"] == 4


def test_a_lightning_checkpoint_is_one_save_however_it_is_written(tmp_path):
    pytest.importorskip("lightning")
    out = tmp_path / "out"
    run = neurondesk_run(tmp_path, [str(out)], workload=SCRIPTS / "lightning_fit.py")
    assert run.returncode == 0, run.stderr[-3000:]
    saves = [e for e in run.events if e["kind"] == "checkpoint" and e["op"] == "save"]
    # ModelCheckpoint's two and the user's own, each through Trainer.save_checkpoint; its torch.save inside not counted
    assert [(e["api"], e["step"]) for e in saves] == [("lightning.Trainer.save_checkpoint", 3),
                                                      ("lightning.Trainer.save_checkpoint", 6),
                                                      ("lightning.Trainer.save_checkpoint", 6)]
    names = ["step=3.ckpt", "step=6.ckpt", "final.ckpt"]
    assert [e["bytes"] for e in saves] == [(out / n).stat().st_size for n in names]
    f = run.summary["figures"]
    assert f["checkpoint_saves"] == 2 and f["checkpoint_last_step"] == 6  # two files of step 6: one checkpoint
