"""Bad input at the command line: one clear line naming the input and what to do."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, base_env


def nd(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=base_env(tmp_path), timeout=60)


def test_missing_workload_executable_exits_127_and_keeps_the_run_folder(tmp_path):
    p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(tmp_path / "r"),
           "--", "no-such-program-xyz", "--flag")
    assert p.returncode == 127
    assert "'no-such-program-xyz' is not an executable on PATH" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["exit_code"] == 127 and summary["steps"] == 0


def test_summary_of_a_folder_without_a_journal_says_what_to_give(tmp_path):
    p = nd(tmp_path, "summary", str(tmp_path / "nothing"))
    assert p.returncode == 2
    assert "events.jsonl not found" in p.stderr and "neurondesk history" in p.stderr


def test_nothing_to_run(tmp_path):
    p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge")
    assert p.returncode == 2 and "nothing to run" in p.stderr


def test_out_of_range_or_non_numeric_run_options_are_refused_naming_the_option(tmp_path):
    cases = [("--steps", "-3", "whole number from 1 to"), ("--warmup-steps", "-5", "whole number from 0 to"),
             ("--target-loss", "nan", "finite number"), ("--price-per-hour", "-1", "finite number from 0 to"),
             ("--price-per-hour", "nan", "finite number from 0 to"), ("--price-per-hour", "inf", "finite number from 0 to"),
             ("--price-per-hour", "abc", "finite number from 0 to"), ("--samples-per-step", "0", "whole number from 1 to"),
             ("--min-samples-per-s", "-1", "finite number from 0 to"),
             ("--max-first-compile-s", "nan", "finite number from 0 to")]
    for option, value, expected in cases:
        p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", option, value,
               "--run-dir", str(tmp_path / "r"), "--", "true")
        assert p.returncode == 2, (option, value)
        line = p.stderr.strip().splitlines()[-1]
        assert f"argument {option}: expected a {expected}" in line and f"got {value!r}" in line, (option, value, p.stderr)
    assert not (tmp_path / "r").exists()


def test_a_run_dir_holding_a_run_is_refused_in_one_line_unless_force(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "events.jsonl").write_text("")
    p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(d), "--", "true")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "already holds a run" in p.stderr and "--force" in p.stderr
    p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(d), "--force",
           "--", "true")
    assert p.returncode == 0, p.stderr
    assert json.loads((d / "summary.json").read_text())["exit_code"] == 0
    assert len(list(d.glob("previous-*/events.jsonl"))) == 1
    assert (d / "events.jsonl").stat().st_mode & 0o777 == 0o600


def test_an_unwritable_run_folder_is_one_line_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    # /proc takes no new folders, even for root: a stand-in for a read-only filesystem
    p = nd(tmp_path, "run", "--headless", "--price-per-hour", "1", "--run-dir", "/proc/neurondesk-test/run",
           "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert p.returncode == 2
    assert p.stderr.startswith("neurondesk: cannot write the run folder /proc/neurondesk-test")
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not marker.exists()  # the workload never started
