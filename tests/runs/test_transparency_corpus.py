"""Nothing of neurondesk is reachable from a user's objects (issue: a model under neurondesk must
deep-copy, pickle and save exactly as without it). The corpus (tests/transparency/corpus.py) does
what users do with models and optimizers — copy, deepcopy, pickle, torch.save / torch.load both
ways (to a buffer, to a file, into a missing folder: the same error), jit.script / trace, export, compile, DDP / FSDP2, spawn, LBFGS, GradScaler, EMA — and prints
one digest a line. Run alone and under `neurondesk run --headless`, on eager CPU, XLA on the CPU
and torch.compile: the same exit code, the same stdout byte for byte, the same stderr (numbers
masked: torch's own warnings carry times and pids), while the probe did watch the run."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import HAS_XLA, REAL_RUN_TIMEOUT_S, REPO, base_env, neurondesk_run

CORPUS = REPO / "tests" / "transparency" / "corpus.py"


def _masked(text: str) -> str:
    return re.sub(r"\d+", "N", text)


@pytest.mark.parametrize("mode", ["eager", "compile", "xla"])
def test_the_corpus_prints_the_same_alone_and_under_neurondesk(tmp_path, mode):
    if mode == "xla" and not HAS_XLA:
        pytest.skip("torch-xla is not installed in this interpreter; `make test` installs it")
    env = base_env(tmp_path)
    alone = subprocess.run([sys.executable, str(CORPUS), "--mode", mode], capture_output=True, timeout=REAL_RUN_TIMEOUT_S,
                           env=env, cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout.decode()[-3000:]  # the corpus itself works: every operation ran
    run = neurondesk_run(tmp_path, ["--mode", mode], workload=CORPUS, timeout=REAL_RUN_TIMEOUT_S, env=env)
    stdout = (run.run_dir / "stdout.log").read_bytes()
    stderr = (run.run_dir / "stderr.log").read_bytes().decode()
    assert run.returncode == alone.returncode
    assert stdout == alone.stdout
    assert _masked(stderr) == _masked(alone.stderr.decode())
    # and the probe was there, watching: training steps with the batch's samples, no hook turned off
    steps = [e for e in run.events if e["kind"] == "step"]
    assert len(steps) >= 5 and all(e.get("samples") == 6 for e in steps[:3])
    failed = [e["message"] for e in run.events if e["kind"] == "notice" and "probe" in e.get("message", "")]
    assert failed == []
    # its checkpoint hooks saw the saves and loads, and the ones that raised (a missing folder; a whole module
    # refused by weights_only) as failed
    ckpt = [e for e in run.events if e["kind"] == "checkpoint" and e["api"] in ("torch.save", "torch.load")]
    assert {(e["op"], e["ok"]) for e in ckpt} == {("save", True), ("load", True), ("save", False), ("load", False)}
    assert any(e["bytes"] for e in ckpt if e["op"] == "save" and e["ok"])
