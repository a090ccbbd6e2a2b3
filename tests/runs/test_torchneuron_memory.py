"""TorchNeuron's device memory (issue 52 item 3): the allocator statistics torch-neuronx's source has
(torch_neuronx/memory.py ``memory_stats``: ``_C._get_memory_stats``; a device OOM is
NeuronCachingAllocator.cpp's ``NRT allocation failed for size N (OOM)``), as the double plays them, read
by the probe at most once in 10 s and at exit, per rank in summary.json, the Devices panel's words, the
creep series and the crash explanation. Real `neurondesk run`s under torch 2.13 with the double, and
the probe's reader and the reduction on their own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

from torch213 import DOUBLE, SCRIPTS, run_torchneuron, torch213_python, torchneuron_env

from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import run_events as ev
from neurondesk.core.findings.crash_memory import torchneuron_memory
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.neuron_summary import neuron_section
from neurondesk.core.view.devices_view import torchneuron_lines
from neurondesk.probe.bootstrap._neurondesk_probe.backends import torchneuron as tn

SCRIPT = SCRIPTS / "device_memory.py"
MIB = 1 << 20
GIB = 1 << 30

# torch_neuronx/memory.py memory_stats's docstring: the fields it returns, and those of each byte figure
STATS_READ = """
import json, torch, torch_neuronx
x = torch.ones(1000, device="neuron")
s = torch_neuronx.memory.memory_stats()
print(json.dumps({"keys": sorted(s), "byte_keys": sorted(s["allocated_bytes"]), "allocated": s["allocated_bytes"],
                  "info": list(torch.accelerator.get_memory_info()),
                  "flat": torch.accelerator.memory_stats()["allocated_bytes.all.current"]}))
"""


def test_the_double_has_every_field_of_torch_neuronx_memory_stats(tmp_path: Path):
    env = torchneuron_env(tmp_path, TORCHNEURON_DOUBLE_HBM_BYTES=str(64 * MIB))
    p = subprocess.run([torch213_python(), "-c", STATS_READ], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["keys"] == sorted(["allocated_bytes", "reserved_bytes", "active_bytes", "num_alloc_retries", "num_ooms",
                                  "num_tensor_frees", "allocation_requests"])
    assert got["byte_keys"] == ["allocated", "current", "freed", "peak"]
    assert got["allocated"]["current"] == 4000 == got["flat"]  # 1000 float32, the same figure both ways
    assert got["info"][1] == 64 * MIB and got["info"][0] < 64 * MIB
    cited = (DOUBLE / "torch_neuronx" / "memory.py").read_text()
    assert "_get_memory_stats" in cited and "AllocateWithRetry" in cited


def test_a_device_oom_is_explained_with_the_ranks_peak_and_capacity(tmp_path: Path):
    env = torchneuron_env(tmp_path, TORCHNEURON_DOUBLE_HBM_BYTES=str(64 * MIB))
    truth_path = tmp_path / "truth.json"
    run = run_torchneuron(tmp_path / "run", SCRIPT, [str(truth_path), "--leak", "16"], env)
    assert run.returncode != 0
    truth = json.loads(truth_path.read_text())
    crash = run.summary["crash"]
    assert crash["kind"] == "device-oom"
    # the steps that had ended: those the truth has, and the one whose optimizer step ran before the leak failed
    died_at = len(truth) + 1
    peak = truth[-1]["reserved_peak"]
    assert f"device OOM at step {died_at}: peak reserved {peak / MIB:.1f} MiB of 64.0 MiB on rank 0" in crash["finding"]
    assert "NRT allocation failed for size 16777216 (OOM)" in run.stderr + run.stdout + json.dumps(run.summary)
    (row,) = run.summary["neuron"]["device_memory"]
    assert row["reserved_peak_bytes"] == peak
    # the failing step's forward allocated its activations before the leak's 16 MiB failed
    assert truth[-1]["allocated_peak"] <= row["allocated_peak_bytes"] < truth[-1]["allocated_peak"] + 16 * MIB
    assert row["ooms"] == 1 and row["capacity_bytes"] == 64 * MIB and row["source"] == "torch_neuronx.memory"


def test_a_run_that_fits_has_its_figures_and_no_oom(tmp_path: Path):
    env = torchneuron_env(tmp_path)
    truth_path = tmp_path / "truth.json"
    run = run_torchneuron(tmp_path / "run", SCRIPT, [str(truth_path)], env)
    assert run.returncode == 0, run.stderr[-3000:]
    truth = json.loads(truth_path.read_text())
    (row,) = run.summary["neuron"]["device_memory"]
    assert row["allocated_peak_bytes"] == max(t["allocated_peak"] for t in truth) > 0
    assert row["ooms"] == 0 and row["capacity_bytes"] == 24 * GIB  # the double's default device
    assert run.summary.get("crash") is None


# ---------------------------------------------------------------- the probe's reader, alone
class _Clock:
    step = 3
    train_dims = None


def _hooks(module) -> tuple[tn.TorchNeuronHooks, list[dict]]:
    sent: list[dict] = []
    probe = SimpleNamespace(clock=_Clock(), send=sent.append, guarded=lambda fn, *a, hook: fn(*a))
    hooks = tn.TorchNeuronHooks(probe)
    hooks.module = module
    return hooks, sent


def _module(stats):
    return SimpleNamespace(memory=SimpleNamespace(memory_stats=stats), current_device=lambda: 5)


def test_the_probe_reads_at_most_once_in_10_s_off_the_step_path(monkeypatch):
    calls = []

    def stats():
        calls.append(1)
        return {"allocated_bytes": {"current": 7, "peak": 9}, "reserved_bytes": {"current": 0, "peak": 0},
                "active_bytes": {"current": 7, "peak": 9}, "num_alloc_retries": 2, "num_ooms": 0}

    hooks, sent = _hooks(_module(stats))
    hooks.metrics = SimpleNamespace(get_counter_value=lambda name: 0, get_metric_data=lambda name: None)
    hooks.cache_said = True
    now = [10_000_000_000]
    monkeypatch.setattr(tn.time, "monotonic_ns", lambda: now[0])
    for _ in range(50):  # 50 step ends within 9.8 s: one read
        hooks.at_step_end()
        now[0] += 200_000_000
    assert len(calls) == 1
    now[0] += 300_000_000  # 10 s after the read: the next step end reads again
    hooks.at_step_end()
    assert len(calls) == 2
    msg = [m for m in sent if m["kind"] == "neuron_device_memory"][0]
    assert msg["allocated"] == 7 and msg["allocated_peak"] == 9 and msg["alloc_retries"] == 2 and msg["device"] == 5
    assert msg["source"] == "torch_neuronx.memory"


def test_a_memory_read_that_raises_is_said_once_and_never_reaches_the_script():
    def stats():
        raise RuntimeError("nrt not ready")

    hooks, sent = _hooks(_module(stats))
    hooks.memory.read("step", 0)
    hooks.memory.read("step", 5_000_000_000)
    hooks.memory.read("exit")
    notices = [m for m in sent if m["kind"] == "notice"]
    assert len(notices) == 1 and "nrt not ready" in notices[0]["message"]
    assert not [m for m in sent if m["kind"] == "neuron_device_memory"]


def test_a_figure_the_source_lacks_is_none_never_zero():
    hooks, sent = _hooks(_module(lambda: {"allocated_bytes": {"current": 5}, "num_ooms": "?"}))
    hooks.memory.read("exit")
    (msg,) = sent
    assert msg["allocated"] == 5 and msg["allocated_peak"] is None and msg["reserved"] is None
    assert msg["ooms"] is None and msg["alloc_retries"] is None


# ---------------------------------------------------------------- the reduction and its words
T0 = 1_800_000_000.0


def _state(ranks: int = 2) -> RunState:
    s = RunState()
    s.apply(ev.RunStarted(t=T0, run_id="r", command=["torchrun", "train.py"]))
    for rank in range(ranks):
        s.apply(ev.ProcessAttached(t=T0 + 1, pid=100 + rank, rank=rank))
    return s


def test_per_rank_peaks_the_oom_words_and_the_panel_lines():
    s = _state(6)
    for rank in range(6):
        for i, reserved in enumerate((10 * GIB, 20 * GIB if rank == 5 else 12 * GIB)):
            s.apply(nf.NeuronDeviceMemory(t=T0 + 10 + i, pid=100 + rank, step=800 + i, device=0,
                                          allocated=reserved - GIB, allocated_peak=reserved - GIB, reserved=reserved,
                                          reserved_peak=reserved, capacity=24 * GIB, ooms=0, alloc_retries=0,
                                          source="torch_neuronx.memory"))
    s.apply(nf.NeuronDeviceMemory(t=T0 + 20, pid=105, step=812, device=0, allocated=GIB, reserved=21 * GIB,
                                  reserved_peak=int(23.1 * GIB), ooms=1, alloc_retries=3, capacity=24 * GIB,
                                  at="exit", source="torch_neuronx.memory"))
    mem = s.parts.memory.torchneuron
    assert mem.oom_words(105, 812) == ("device OOM at step 812: peak reserved 23.1 of 24.0 GiB on rank 5 "
                                       "(1 allocation failed; 3 retried after pruning)")
    assert mem.oom_words(None, 812).endswith("on rank 5 (1 allocation failed; 3 retried after pruning)")
    words = torchneuron_memory(s, ["RuntimeError: NRT allocation failed for size 2147483648 (OOM)"])
    assert words is not None and words.limit_bytes == 24 * GIB and words.used_bytes == int(23.1 * GIB)
    assert "it tried to allocate 2.0 GiB more" in words.words
    lines = torchneuron_lines(s)
    assert lines[0].startswith("rank 5 neuron:0") and "peak 23.1 of 24.0 GiB" in lines[0] and "1 OOM" in lines[0]
    rows = neuron_section(s).device_memory
    assert [r.rank for r in rows] == [0, 1, 2, 3, 4, 5]
    assert rows[5].reserved_peak_bytes == int(23.1 * GIB) and rows[0].reserved_peak_bytes == 12 * GIB


def test_without_a_capacity_the_words_say_it_was_not_read():
    s = _state(1)
    s.apply(nf.NeuronDeviceMemory(t=T0 + 10, pid=100, step=4, allocated=3 * MIB, allocated_peak=5 * MIB,
                                  source="torch_neuronx.memory"))
    assert s.parts.memory.torchneuron.oom_words(100, 4) == (
        "device OOM at step 4: peak allocated 5.0 MiB (the device's capacity not read: "
        "torch.accelerator.get_memory_info gave none) on rank 0")


def test_a_rank_whose_allocated_memory_grows_is_a_creep_against_the_devices_capacity():
    from neurondesk.core.figures.run_figures import run_figures

    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "t.py"], warmup_steps=1))
    s.apply(ev.ProcessAttached(t=0.1, pid=7, rank=3))
    for i in range(60):
        s.apply(ev.StepEnded(t=1.0 + i, pid=7, step=i, duration_s=1.0, data_wait_s=0.0))
        allocated = 4 * GIB + 16 * MIB * i
        s.apply(nf.NeuronDeviceMemory(t=1.5 + i, pid=7, step=i + 1, device=0, allocated=allocated,
                                      allocated_peak=allocated, reserved=allocated + 512 * MIB,
                                      capacity=24 * GIB, source="torch_neuronx.memory"))
    (leak,) = run_figures(s).memory_creep.leaks
    assert (leak.memory, leak.device, leak.rank, leak.limit, leak.limit_bytes) == (
        "torchneuron", "neuron device 0", 3, "device memory", 24 * GIB)
    # what is left is the capacity less what the allocator holds (reserved, the larger)
    assert leak.left_bytes == 24 * GIB - (4 * GIB + 16 * MIB * 59 + 512 * MIB)
    assert leak.words.startswith("rank 3 neuron device 0 allocated memory +56 GiB an hour since step 2, 16 MiB a step: "
                                 "at this pace neuron device 0's memory (")


def test_without_torch_neuronx_memory_the_statistics_come_from_torch_accelerator(monkeypatch):
    import sys

    flat = {"allocated_bytes.all.current": 10, "allocated_bytes.all.peak": 12, "reserved_bytes.all.current": 20,
            "reserved_bytes.all.peak": 22, "active_bytes.all.current": 10, "active_bytes.all.peak": 12,
            "num_alloc_retries": 1, "num_ooms": 0}
    accel = SimpleNamespace(current_accelerator=lambda: SimpleNamespace(type="neuron"), memory_stats=lambda: flat,
                            get_memory_info=lambda: (100, 1000))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(accelerator=accel))
    hooks, sent = _hooks(SimpleNamespace(current_device=lambda: 0))  # a torch_neuronx without .memory
    hooks.memory.read("exit")
    (msg,) = sent
    assert msg["source"] == "torch.accelerator" and msg["capacity"] == 1000
    assert (msg["allocated"], msg["allocated_peak"], msg["reserved_peak"], msg["alloc_retries"]) == (10, 12, 22, 1)


def test_at_64_ranks_the_panel_names_the_fullest_and_counts_the_rest():
    s = _state(64)
    for rank in range(64):
        peak = (20 if rank == 41 else 10) * GIB
        s.apply(nf.NeuronDeviceMemory(t=T0 + 10, pid=100 + rank, step=5, device=rank % 4, allocated=peak,
                                      allocated_peak=peak, capacity=24 * GIB, source="torch_neuronx.memory"))
    lines = torchneuron_lines(s)
    assert len(lines) == 9 and lines[0].startswith("rank 41 neuron:1") and lines[-1] == "… 56 more ranks"


def test_the_device_memory_survives_a_checkpoint_of_the_reducer_state():
    from neurondesk.store.state_codec import decode_state, encode_state

    s = _state(1)
    s.apply(nf.NeuronDeviceMemory(t=T0 + 10, pid=100, step=3, allocated=5 * MIB, reserved_peak=9 * MIB,
                                  capacity=64 * MIB, ooms=1, source="torch_neuronx.memory"))
    again = decode_state(encode_state(s))
    assert again.parts.memory.torchneuron.oom_words(100, 3) == s.parts.memory.torchneuron.oom_words(100, 3) == (
        "device OOM at step 3: peak reserved 9.0 MiB of 64.0 MiB on rank 0 (1 allocation failed)")
