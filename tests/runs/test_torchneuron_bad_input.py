"""TorchNeuron's signals gone wrong (issue 44's bad input), in real runs under torch 2.13 with the
TorchNeuron double: a log line cut in half, a line written in two halves, the log file deleted (and
a new one made at its path) mid-run, a get_dynamo_metrics that raises or returns other fields, a
user's TORCH_NEURONX_LOG_FILE in a place that cannot be written. One line each; the training
runs to its end, its output its own; nothing the metrics counted is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch213 import SCRIPTS, run_torchneuron, torchneuron_env


def _notices(summary: dict, words: str) -> list[str]:
    return [n for n in summary["notices"] if words in n]


def test_a_split_line_a_deleted_log_and_a_cut_line_each_say_one_line_and_lose_no_count(tmp_path: Path):
    run = run_torchneuron(tmp_path / "run", SCRIPTS / "log_trouble.py",
                          ["--split-line", "--delete-log", "10", "--cut-line"], torchneuron_env(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    out = (run.run_dir / "stdout.log").read_text().splitlines()
    assert out[:3] == ["step 0", "step 10", "step 20"] and out[-1].startswith("compiles ")
    compiles = int(out[-1].split()[1])
    s = run.summary
    assert s["compile_count"] == compiles > 0
    neff = s["neuron"]["neff_cache"]
    # every NEFF line, those written into the deleted file included, and the one written in two halves
    assert neff["log_misses"] == compiles + 1 and neff["log_stores"] == compiles
    assert len(_notices(s, "was deleted while the run went on")) == 1
    assert len(_notices(s, "was replaced by a new file")) == 1  # the script's last write made a new file
    cut = [e for e in run.events if e["kind"] == "parse_problem" and e["source"] == "torchneuron"]
    assert len(cut) == 1 and "cut in half" in cut[0]["error"] and cut[0]["raw"].endswith("Storing NEFF fo")


@pytest.mark.parametrize("mode", ["", "raise", "other-fields"])
def test_get_dynamo_metrics_read_at_compile_ends_whatever_it_does(tmp_path: Path, mode: str):
    """Read at the end of each dynamo compile whose graphs counters["neuron"] counted, and at exit:
    never per step. Each graph is one record whether get_dynamo_metrics, the graph_stats table or
    both told of it. One that raises turns that reading off with one line; one whose records have
    other fields (a newer torch-neuronx) says so once and is not read."""
    calls = tmp_path / "calls"
    env = torchneuron_env(tmp_path, TORCHNEURON_DOUBLE_DYNAMO_METRICS=mode, TORCHNEURON_DOUBLE_CALLS=str(calls))
    run = run_torchneuron(tmp_path / "run", SCRIPTS / "compiled.py", [], env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (run.run_dir / "stdout.log").read_text().startswith("done, loss ")
    s = run.summary
    dynamo = [c for c in s["compiles"] if c["source"] == "dynamo"]
    assert len(dynamo) >= 2 and s["compile_count"] == len(dynamo)  # no NEFF group, nothing counted twice
    assert s["neuron"]["neff_cache"]["graph_neffs"] >= len(dynamo)
    splits = s["neuron"]["compile_splits"]
    ids = [x["graph_id"] for x in splits]
    assert all(ids) and len(ids) == len(set(ids)) == s["neuron"]["neff_cache"]["graph_neffs"]
    assert all(x["compile_s"] for x in splits)
    made = calls.read_text().count("\n")
    assert 1 <= made <= len(dynamo) + 2 and made < s["steps"]  # compile ends and exit, never per step
    failed = _notices(s, "probe hook 'torchneuron-graphs' failed")
    odd = _notices(s, "without the documented fields")
    if mode == "raise":
        assert len(failed) == 1 and "NRT: synchronize failed" in failed[0] and made == 1 and not odd
    elif mode == "other-fields":
        assert len(odd) == 1 and not failed
    else:
        assert not failed and not odd


def test_a_users_log_file_where_it_cannot_be_written_is_said_once(tmp_path: Path):
    """/sys: not even root may make a file there (the double, as TorchNeuron, writes to the console instead)."""
    env = torchneuron_env(tmp_path, TORCH_NEURONX_LOG_FILE="/sys/neurondesk-test-torchneuron.log",
                          TORCH_NEURONX_LOG_LEVEL="2")
    run = run_torchneuron(tmp_path / "run", SCRIPTS / "eager_shapes.py", [], env)
    assert run.returncode == 0, run.stderr[-3000:]
    s = run.summary
    said = _notices(s, "/sys/neurondesk-test-torchneuron.log")
    assert len(said) == 1 and "NEFF compiles come from its metrics" in said[0]
    assert s["compile_count"] > 0 and s["neuron"]["neff_cache"]["log_misses"] == 0
    assert not (run.run_dir / "torchneuron.log").exists()  # theirs is the one TorchNeuron was told
