"""Restart counts read as launchers write them (issue 53 items 11 and 13): a count that ``str.isdigit``
takes but ``int`` does not ('²') is refused in one line and the run is still the run (its run_started
reduced, its command kept, listed); a crash loop of 30 restarts in 95 s is 30 failures to the checkpoint
interval advice, beside the 30 restarts goodput counts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.job_identity import identify, whole_number
from neurondesk.core.figures.goodput import goodput
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from tests.conftest import DATA, REAL_RUN_TIMEOUT_S, REPO, base_env

T0 = 1_000_000.0


@pytest.mark.parametrize("text,value", [("0", 0), ("12", 12), ("²", None), ("١٢", None), ("-1", None),
                                        (" 3", None), ("", None), ("12345678", None)])
def test_a_count_is_ascii_digits_or_none(text, value):
    assert whole_number(text) == value


@pytest.mark.parametrize("var", ["SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT"])
def test_a_superscript_restart_count_is_refused_in_one_line_and_run_started_is_kept(var):
    s = RunState()
    s.apply(ev.RunStarted(t=T0, run_id="r1", command=["python", "t.py"], launch_env={var: "²"}))
    s.apply(ev.ProcessAttached(t=T0 + 1, pid=5, rank=0, world_size=1, launch_env={var: "²", "RANK": "0"}))
    s.apply(ev.StepEnded(t=T0 + 2, pid=5, step=0, duration_s=0.5))
    s.apply(ev.RunFinished(t=T0 + 3, exit_code=0))
    assert s.reduce_errors == 0, s.reduce_error_text
    summary = run_summary(s)
    assert (summary.run_id, summary.command) == ("r1", ["python", "t.py"])
    g = goodput(s)
    assert g.restarts == 0
    assert g.problems == [f"{var}='²' is not a whole number (digits 0-9, at most 7): the restart count ignored; "
                          "check what sets it"]  # once, for the recorder's and the worker's alike


def test_a_superscript_rank_in_the_launch_variables_is_no_rank_and_no_crash():
    job = identify({"GROUP_RANK": "²", "GROUP_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "j"}, "host")
    assert (job.job_id, job.node_rank, job.nodes) == ("j", None, 2)


def test_a_real_run_under_a_superscript_slurm_restart_count_is_listed_with_its_command(tmp_path):
    run_dir = tmp_path / "run"
    env = base_env(tmp_path) | {"SLURM_RESTART_COUNT": "²"}
    workload = [sys.executable, str(DATA / "workloads" / "steps.py"), "5", "0", str(tmp_path / "done")]
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                        "--", *workload], capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run_id"] and summary["command"] == workload
    assert "SLURM_RESTART_COUNT='²' is not a whole number" in p.stdout + p.stderr
    listed = subprocess.run([sys.executable, "-m", "neurondesk.cli", "ls"], capture_output=True, text=True,
                            timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    assert summary["run_id"] in listed.stdout, listed.stdout + listed.stderr


def crash_loop(restarts: int = 30, every_s: float = 95.0 / 30) -> RunState:
    """torchrun --max-restarts N on a script that saves at its second step and dies at its third."""
    from neurondesk.core.events.checkpoint_events import CheckpointOp

    s = RunState()
    s.apply(ev.RunStarted(t=T0, run_id="loop", command=["torchrun", "t.py"]))
    for n in range(restarts + 1):
        t, pid = T0 + n * every_s, 100 + n
        s.apply(ev.ProcessAttached(t=t + 0.1, pid=pid, rank=0, world_size=1,
                                   launch_env={"TORCHELASTIC_RESTART_COUNT": str(n), "RANK": "0"}))
        for i in range(3):
            s.apply(ev.StepEnded(t=t + 0.5 + i * 0.5, pid=pid, step=i, duration_s=0.4))
        s.apply(CheckpointOp(t=t + 1.6, pid=pid, op="save", api="torch.save", duration_s=0.1, step=2))
        s.apply(ev.ProcessFailed(t=t + 2.5, pid=pid, error="RuntimeError: boom", step=3))
    s.apply(ev.RunFinished(t=T0 + restarts * every_s + 3.0, exit_code=1))
    return s


def test_a_crash_loop_of_30_restarts_in_95_s_is_30_failures_to_the_checkpoint_advice():
    from neurondesk.core.figures.run_figures import run_figures
    from neurondesk.core.findings.diagnostics import diagnostics

    s = crash_loop()
    assert goodput(s).restarts == 30
    advice = run_figures(s).checkpoint_advice
    assert advice is not None and advice.failures == 30
    assert advice.mtbf_s == pytest.approx(s.elapsed_s() / 30, rel=1e-3)
    assert "30 failures in" in advice.words
    words = [d.message for d in diagnostics(s) if d.kind == "checkpoint-interval"]
    assert words in ([], [advice.words])  # the diagnostic, when said, is the figures' own words


@pytest.mark.parametrize("rank,value", [("3", 3), ("²", None), ("", None)])
def test_the_probes_checkpoint_rank_is_ascii_digits_or_none(monkeypatch, rank, value):
    """RANK=² made int() raise in every checkpoint message (the hook then turned itself off)."""
    monkeypatch.syspath_prepend(str(REPO / "neurondesk" / "probe" / "bootstrap"))
    from _neurondesk_probe import checkpoints

    monkeypatch.setenv("RANK", rank)
    assert checkpoints._rank() == value


def test_a_real_run_under_superscript_rank_variables_is_still_watched(tmp_path):
    """RANK / LOCAL_RANK / WORLD_SIZE = '²' (str.isdigit, not int): the probe's hello raised, so the workload
    ran unwatched; now the ranks are unknown and every step is counted."""
    run_dir = tmp_path / "run"
    env = base_env(tmp_path) | {"RANK": "²", "LOCAL_RANK": "²", "WORLD_SIZE": "²"}
    workload = [sys.executable, str(DATA / "workloads" / "steps.py"), "5", "0", str(tmp_path / "done")]
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                        "--", *workload], capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 5, summary.get("steps")


@pytest.mark.parametrize("text,value", [("3", 3), ("²", None), ("", None), (" 7 ", 7), ("12345678", None)])
def test_the_probes_launch_numbers_are_ascii_digits_or_none(monkeypatch, text, value):
    monkeypatch.syspath_prepend(str(REPO / "neurondesk" / "probe" / "bootstrap"))
    from _neurondesk_probe import _state

    assert _state.env_int("WORLD_SIZE", {"WORLD_SIZE": text}) == value
