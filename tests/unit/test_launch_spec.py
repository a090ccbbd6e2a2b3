"""The launch spec: what the launcher hands the recorder process, encoded once onto its stdin and
decoded, checked field by field, once there (recorder/options.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from neurondesk.core.rules.checks import Thresholds
from neurondesk.recorder.options import LaunchSpec, LaunchSpecError, RunOptions, decode_spec, encode_spec
from neurondesk.store.own_files import FileId


def _every_option_set(tmp_path: Path) -> RunOptions:
    return RunOptions(
        instance_type="trn1.2xlarge", price_per_hour=1.34, price_source="test", price_table=str(tmp_path / "prices.json"), warmup_steps=7, target_loss=0.5,
        samples_per_step=32, tokens_per_step=4096, steps_requested=100, run_dir=tmp_path / "run", force=True,
        run_root=tmp_path / "root", cwd="/somewhere", env={"A": "1", "PATH": "/bin"}, telemetry=False,
        neuron_monitor_replay="monitor.jsonl", neuron_observer="http://127.0.0.1:9/metrics", graph_stats="stats",
        neuron_profile=True, metrics_addr="127.0.0.1:0", job_id="job-1", node="trn-00", metrics_grace_s=5.0,
        budget_usd=12.5, budget_stop=True, hang_after_s=30.0, notify=True, notify_url="http://127.0.0.1:9/hook",
        notify_compile_s=10.0, checks=Thresholds(2, True, 60.0, 100.0), tensorboard="tb", mlflow="file:mlruns",
        wandb="project")


def test_every_option_arrives_as_it_was_given(tmp_path):
    options = _every_option_set(tmp_path)
    unset = [f.name for f in dataclasses.fields(RunOptions) if getattr(options, f.name) == getattr(RunOptions(), f.name)]
    assert unset == []  # a new option is added here too, so that its trip is checked
    spec = LaunchSpec(["python", "train.py", "--lr", "0.1", "--tag", ""], tmp_path / "run", options, FileId(41, 42))
    line = encode_spec(spec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = decode_spec(line)
    assert back == spec
    assert isinstance(back.options.run_dir, Path) and isinstance(back.options.checks, Thresholds)
    assert isinstance(back.lock, FileId) and back.run_dir == tmp_path / "run"


@pytest.mark.parametrize(("edit", "words"), [
    (lambda s: s.replace(b'"warmup_steps":5', b'"warmup_steps":"5"'), "$.options.warmup_steps"),
    (lambda s: s.replace(b'"checks":null', b'"checks":{"loss_finite":"yes"}'), "$.options.checks.loss_finite"),
    (lambda s: s.replace(b'"command":["true"]', b'"command":[]'), "the command is empty"),
    (lambda s: s.split(b',"run_dir"')[0] + b"}", "missing required field `run_dir`"),
    (lambda s: s[:20], "truncated"),
    (lambda s: b"command=true\n", "malformed"),
])
def test_a_spec_the_recorder_cannot_take_is_refused_in_one_line(tmp_path, edit, words):
    good = encode_spec(LaunchSpec(["true"], tmp_path, RunOptions()))
    with pytest.raises(LaunchSpecError) as refused:
        decode_spec(edit(good))
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_relative_run_folder_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not an absolute path"):
        LaunchSpec(["true"], Path("run"), RunOptions())
    line = encode_spec(LaunchSpec(["true"], tmp_path, RunOptions())).replace(str(tmp_path).encode(), b"run")
    with pytest.raises(LaunchSpecError, match="not an absolute path"):
        decode_spec(line)


def test_the_recorder_process_refuses_a_bad_spec_and_touches_nothing(tmp_path):
    """A real recorder given a spec with a field of the wrong type: one line on its stderr (the
    launcher shows the last line of recorder.log), its own exit status, nothing in the folder."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    line = encode_spec(LaunchSpec(["true"], run_dir, RunOptions(env={}))).replace(b'"telemetry":true',
                                                                                  b'"telemetry":"on"')
    p = subprocess.run([sys.executable, "-m", "neurondesk.recorder"], input=line, capture_output=True, cwd=REPO,
                       timeout=120)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert err.count("\n") == 1 and "$.options.telemetry" in err and err.startswith("neurondesk recorder: "), err
    assert list(run_dir.iterdir()) == []
