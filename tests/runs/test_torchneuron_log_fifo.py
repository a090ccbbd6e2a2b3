"""A user's TORCH_NEURONX_LOG_FILE that is a FIFO whose reader attaches late (issue 53 item 1): the
training waits for its reader as it does alone, and ends as it does alone; neurondesk never opens the
FIFO (an open and close of its own would hand the writer a reader that then goes away: BrokenPipeError
at TorchNeuron's next write) and says so in one line. Real processes: the eager script under torch 2.13
with the TorchNeuron double, alone and under `neurondesk run`, a `cat` reading the FIFO 8 s after each
start. The double writes a warning at import, right after its open of the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import REAL_RUN_TIMEOUT_S, REPO
from torch213 import SCRIPTS, torch213_python, torchneuron_env

SCRIPT = SCRIPTS / "eager_shapes.py"
READER_LATE_S = 8.0  # the reader attaches this long after the start (not a timed assertion: a delay)


def _with_late_reader(cmd: list[str], env: dict[str, str], fifo: Path, got: Path) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    time.sleep(READER_LATE_S)
    with open(got, "wb") as out:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=out)
        stdout, stderr = proc.communicate(timeout=REAL_RUN_TIMEOUT_S)
        reader.wait(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def test_a_fifo_log_with_a_late_reader_ends_the_training_as_it_ends_alone(tmp_path: Path):
    fifo = tmp_path / "neuron.fifo"
    os.mkfifo(fifo)
    env = torchneuron_env(tmp_path, TORCH_NEURONX_LOG_FILE=str(fifo), TORCH_NEURONX_LOG_LEVEL="2",
                          TORCHNEURON_DOUBLE_WARN="a warning at import: the first write, right after the open")
    alone = _with_late_reader([torch213_python(), str(SCRIPT)],
                              {**env, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache-alone")},
                              fifo, tmp_path / "alone.txt")
    assert alone.returncode == 0, alone.stderr.decode()[-2000:]
    run_dir = tmp_path / "run"
    under = _with_late_reader(
        [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--",
         torch213_python(), str(SCRIPT)],
        {**env, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache-under")}, fifo, tmp_path / "under.txt")
    assert under.returncode == alone.returncode == 0, under.stderr.decode()[-3000:]
    assert b"BrokenPipeError" not in under.stderr
    assert (run_dir / "stdout.log").read_bytes() == alone.stdout
    assert (run_dir / "stderr.log").read_bytes() == alone.stderr
    # the reader got TorchNeuron's lines in both: the same count of NEFF cache misses
    misses = [p.read_text().count("Cache MISS for key") for p in (tmp_path / "alone.txt", tmp_path / "under.txt")]
    assert misses[0] == misses[1] > 0
    said = [n for n in json.loads((run_dir / "summary.json").read_text())["notices"] if str(fifo) in n]
    assert len(said) == 1 and "a FIFO (named pipe), not a regular file: neurondesk does not open it" in said[0]
