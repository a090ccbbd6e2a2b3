"""The caches that cost money (issue 52 item 4): TorchNeuron's in-memory NEFF cache evicting NEFFs
(``CompilationCache.Evictions``, csrc/core/compilation/CompilationCache.cpp ``CheckAndEvictIfNeeded``,
bounded by NEURON_COMPILATION_CACHE_MAX_ENTRIES / _MAX_SIZE_MB) said with the numbers and the setting;
both spellings of the persistent cache's off switch (torch_neuronx/utils.py ``is_neff_cache_disabled``
reads TORCH_NEURONX_DISABLE_NEFF_CACHE; the env-vars page says TORCH_NEURONX_NEFF_DISABLE_CACHE); the HLO
cache folder (TORCH_NEURONX_HLO_CACHE_DIR) watched by the disk forecast. A real `neurondesk run` under
torch 2.13 with the double, and the pure parts alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch213 import SCRIPTS, run_torchneuron, torchneuron_env

from neurondesk.collectors.devices.disk import disk_locations
from neurondesk.collectors.torchneuron import neff_cache_dir
from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import run_events as ev
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.reduce.state import RunState

EAGER = SCRIPTS / "eager_shapes.py"


@pytest.mark.parametrize("name", ["TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE"])
@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_either_spelling_of_the_switch_turns_the_persistent_cache_off(name: str, value: str):
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": "/mnt/neff", name: value}
    assert neff_cache_dir(env) is None
    assert "NEFF cache" not in disk_locations("/r", env)
    assert neff_cache_dir({**env, name: "0"}) == "/mnt/neff"


def test_the_hlo_cache_is_a_place_the_disk_forecast_watches():
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": "/mnt/neff", "TORCH_NEURONX_HLO_CACHE_DIR": "/mnt/hlo"}
    assert disk_locations("/r", env) == {"run folder": "/r", "compile cache": "/var/tmp/neuron-compile-cache",
                                         "NEFF cache": "/mnt/neff", "HLO cache": "/mnt/hlo"}
    assert "HLO cache" not in disk_locations("/r", {"TORCH_NEURONX_NEFF_CACHE_DIR": "/mnt/neff"})


def test_evictions_are_said_with_the_numbers_and_the_setting_that_stops_them():
    s = RunState()
    s.apply(ev.RunStarted(t=1.0, run_id="r", command=["python", "train.py"]))
    for pid in (100, 101):
        s.apply(ev.ProcessAttached(t=2.0, pid=pid, rank=pid - 100))
        s.apply(nf.NeffCacheTotals(t=9.0, pid=pid, step=30, compiles=40, memory_misses=300, evictions=120,
                                   at_exit=True))
    (d,) = [d for d in diagnostics(s) if d.kind == "neff-cache-evictions"]
    assert "evicted 240 NEFFs in 2 processes (600 in-memory misses, 80 NEFFs compiled)" in d.message
    assert "NEURON_COMPILATION_CACHE_MAX_ENTRIES" in d.message and "NEURON_COMPILATION_CACHE_MAX_SIZE_MB" in d.message
    quiet = RunState()
    quiet.apply(nf.NeffCacheTotals(t=9.0, pid=100, step=30, compiles=40, evictions=0, at_exit=True))
    assert not [d for d in diagnostics(quiet) if d.kind == "neff-cache-evictions"]


def test_a_bounded_in_memory_cache_evicts_and_the_run_says_so(tmp_path: Path):
    env = torchneuron_env(tmp_path, NEURON_COMPILATION_CACHE_MAX_ENTRIES="4")
    run = run_torchneuron(tmp_path / "run", EAGER, [str(tmp_path / "truth.json")], env)
    assert run.returncode == 0, run.stderr[-3000:]
    cache = run.summary["neuron"]["neff_cache"]
    assert cache["evictions"] > 0
    (d,) = [d for d in run.summary["diagnostics"] if d["kind"] == "neff-cache-evictions"]
    assert f"evicted {cache['evictions']:,} NEFFs" in d["message"] and "NEURON_COMPILATION_CACHE_MAX_ENTRIES" in d["message"]
    unbounded = run_torchneuron(tmp_path / "run2", EAGER, [str(tmp_path / "truth2.json")], torchneuron_env(tmp_path))
    assert unbounded.returncode == 0, unbounded.stderr[-3000:]
    assert not unbounded.summary["neuron"]["neff_cache"].get("evictions")
    assert not [d for d in unbounded.summary["diagnostics"] if d["kind"] == "neff-cache-evictions"]
    assert json.loads((tmp_path / "truth.json").read_text())  # the script ran to its end


def _totals(s: RunState, pid: int, folder: str | None, compiles: int, seconds: float | None) -> None:
    s.apply(nf.NeffCacheTotals(t=9.0, pid=pid, step=30, compiles=compiles, compile_s=seconds, cache_dir=folder,
                               at_exit=True))


def test_ranks_compiling_into_folders_of_their_own_are_said_with_the_cost_and_the_fix():
    s = RunState()
    s.apply(ev.RunStarted(t=1.0, run_id="r", command=["torchrun", "train.py"]))
    for rank in range(4):
        s.apply(ev.ProcessAttached(t=2.0, pid=100 + rank, rank=rank))
        _totals(s, 100 + rank, f"/scratch/rank{rank}/neff", 500 + rank, 50.0 + rank)
    (d,) = [d for d in diagnostics(s) if d.kind == "neff-cache-unshared"]
    assert d.message.startswith("4 processes compile into 4 different NEFF cache folders (/scratch/rank0/neff, "
                                "/scratch/rank1/neff, /scratch/rank2/neff ...): the same NEFFs compiled in 4 places, "
                                "1,503 compiles and 153.0 s of compiling past the busiest process's")
    assert "TORCH_NEURONX_NEFF_CACHE_DIR shared by every rank" in d.message


def test_one_shared_folder_or_one_compiling_rank_is_not_said():
    shared = RunState()
    for rank in range(4):
        _totals(shared, 100 + rank, "/shared/neff", 500, 50.0)
    warm = RunState()  # rank 0 compiled; the others found everything in memory or on their disk
    _totals(warm, 100, "/a", 500, 50.0)
    _totals(warm, 101, "/b", 0, 0.0)
    off = RunState()  # the cache off: doctor says that, not this finding
    _totals(off, 100, None, 500, 50.0)
    _totals(off, 101, None, 500, 50.0)
    for s in (shared, warm, off):
        assert not [d for d in diagnostics(s) if d.kind == "neff-cache-unshared"]


def test_the_probe_says_the_folder_each_process_compiles_into(monkeypatch, tmp_path: Path):
    from neurondesk.probe.bootstrap._neurondesk_probe.backends.torchneuron import _cache_dir

    monkeypatch.delenv("TORCH_NEURONX_NEFF_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", raising=False)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "n" / ".." / "neff"))
    assert _cache_dir() == str(tmp_path / "neff")  # its real path: two spellings of one folder are one
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR")
    assert _cache_dir() == "/tmp/neff_cache"
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "True")
    assert _cache_dir() is None


def _torchrun(run_dir: Path, caches: Path, env: dict[str, str]):
    import subprocess
    import sys

    from conftest import REAL_RUN_TIMEOUT_S, REPO, Run
    from torch213 import torch213_python

    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--instance-type", "trn2.48xlarge",
           "--price-per-hour", "40", "--run-dir", str(run_dir), "--", torch213_python(), "-m",
           "torch.distributed.run", "--nproc_per_node", "2", str(SCRIPTS / "own_caches.py"), str(caches)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=REAL_RUN_TIMEOUT_S, env=env, cwd=REPO)
    return Run(p.returncode, p.stdout, p.stderr, run_dir)


def test_two_ranks_with_caches_of_their_own_are_named_and_one_shared_cache_is_not(tmp_path: Path):
    env = torchneuron_env(tmp_path)
    run = _torchrun(tmp_path / "run", tmp_path / "own", env)
    assert run.returncode == 0, run.stderr[-3000:]
    (d,) = [d for d in run.summary["diagnostics"] if d["kind"] == "neff-cache-unshared"]
    assert d["message"].startswith(f"2 processes compile into 2 different NEFF cache folders ({tmp_path}/own/rank0, "
                                   f"{tmp_path}/own/rank1): the same NEFFs compiled in 2 places, ")
    # the script puts both ranks' folders under one path when RANK is the same: a shared folder
    same = _torchrun(tmp_path / "run2", tmp_path / "shared", {**env, "NEURONDESK_TEST_SAME_RANK_FOLDER": "1"})
    assert same.returncode == 0, same.stderr[-3000:]
    assert not [d for d in same.summary["diagnostics"] if d["kind"] == "neff-cache-unshared"]
