"""Huge values at the command line are bounded, an unknown instance type is said at the start with
the nearest known ones, and an argument error is one line with a --help hint (issue 24, item 7)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO, base_env


def nd(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=base_env(tmp_path), timeout=120)


def test_huge_values_are_refused_in_one_line_naming_the_option_and_its_bounds(tmp_path):
    cases = [("--steps", "1e26"), ("--steps", str(10**26)), ("--price-per-hour", "1e308"),
             ("--warmup-steps", "999999999999999"), ("--samples-per-step", str(10**13)),
             ("--tokens-per-step", "9" * 5000), ("--max-first-compile-s", "1e300"),
             ("--min-samples-per-s", "1e300"), ("--target-loss", "1e300"),
             ("--max-recompiles-after-warmup", str(10**30))]
    for option, value in cases:
        p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", option, value,
               "--run-dir", str(tmp_path / "r"), "--", "true")
        assert p.returncode == 2, (option, value, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"neurondesk: argument {option}: expected a "), lines
        assert " to " in lines[0] and "`neurondesk run --help`" in lines[0] and len(lines[0]) < 220, lines
    assert not (tmp_path / "r").exists()
    for args in (("ls", "--last", "99999999999"), ("history", "--limit", "-1")):
        p = nd(tmp_path, *args)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert f"argument {args[1]}" in p.stderr and "--help" in p.stderr


def test_values_at_the_bounds_give_finite_figures(tmp_path):
    p = nd(tmp_path, "run", "--headless", "--price-per-hour", "100000", "--steps", str(10**12),
           "--warmup-steps", str(10**12), "--run-dir", str(tmp_path / "r"), "--", "true")
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["cost"]["total_usd"] is None or isinstance(s["cost"]["total_usd"], float)
    assert s["cost"].get("projected_usd") is None or isinstance(s["cost"]["projected_usd"], float)
    assert "inf" not in json.dumps(s["cost"]).lower()


def test_argument_errors_are_one_line_with_a_help_hint_not_the_usage_block(tmp_path):
    for args in (("run", "--headless", "--no-such-flag", "--", "true"), ("no-such-command",),
                 ("history", "--format", "yaml"), ("compare",), ("summary",)):
        p = nd(tmp_path, *args)
        assert p.returncode == 2, args
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1, (args, p.stderr)
        assert lines[0].startswith("neurondesk: ") and "--help`" in lines[0] and "usage:" not in p.stderr, lines


def test_an_unknown_instance_type_is_warned_at_the_start_naming_the_nearest_known(tmp_path):
    p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlage", "--run-dir", str(tmp_path / "r"),
           "--", sys.executable, "-c", "print('workload ran')")
    assert p.returncode == 0, p.stderr
    first = p.stderr.splitlines()[0]
    assert first.startswith("neurondesk: warning: unknown --instance-type 'trn1.2xlage'"), p.stderr
    assert "unpriced" in first and "nearest known: trn1.2xlarge" in first
    assert p.stderr.count("unknown --instance-type") == 1
    p = nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(tmp_path / "k"),
           "--", "true")
    assert p.returncode == 0 and "unknown --instance-type" not in p.stderr
