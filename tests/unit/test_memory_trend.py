"""Memory that creeps (issue 36 item 3): the trend test (core/node/memory_trend.py) on explicit series and
hypothesis' noise, and the reduced run (core/reduce/memory.py, core/findings/memory_creep.py) naming the rank,
its rate, since which step, and when its limit is reached."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.registry import EVENT_TYPES
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.node.memory_trend import MIN_SAMPLES, creep, mann_kendall_z, theil_sen
from neurondesk.core.reduce.memory import MAX_POINTS, RECHECK, MemorySeries
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary

MiB = 1 << 20
TS = [float(i) for i in range(120)]  # two minutes of 1 Hz samples


def _noisy(f, sd: float, seed: int = 1) -> list[float]:
    r = random.Random(seed)
    return [f(t) + r.gauss(0, sd) for t in TS]


def test_theil_sen_ignores_outliers_and_mann_kendall_sees_order():
    ys = [10.0 * t for t in TS]
    ys[5] = ys[70] = 1e12  # two wild spikes
    slope, _ = theil_sen(TS, ys)
    assert abs(slope - 10.0) < 1e-6
    assert mann_kendall_z([float(t) for t in TS]) > 10
    assert mann_kendall_z([5.0] * 50) == 0.0


def test_a_flat_series_with_noise_is_no_leak():
    assert creep(TS, _noisy(lambda t: 900 * MiB, 30 * MiB)) is None


def test_a_steady_ramp_is_a_leak_at_its_rate_from_the_start():
    c = creep(TS, _noisy(lambda t: 900 * MiB + 2 * MiB * t, 8 * MiB))
    assert c is not None and c.start == 0 and c.samples == len(TS)
    assert abs(c.slope_per_s - 2 * MiB) < 0.1 * MiB
    assert c.z > 5


def test_a_one_off_allocation_then_flat_is_no_leak():
    for at in (20, 45, 60, 90):
        assert creep(TS, _noisy(lambda t, at=at: 900 * MiB + (400 * MiB if t >= at else 0), 3 * MiB)) is None, at


def test_a_warm_up_that_levels_off_is_no_leak():
    assert creep(TS, _noisy(lambda t: 900 * MiB + 4 * MiB * min(t, 70), 2 * MiB)) is None


def test_a_leak_that_starts_mid_run_is_found_on_the_later_window():
    c = creep(TS, _noisy(lambda t: 900 * MiB + 3 * MiB * max(0.0, t - 65), 2 * MiB))
    assert c is not None and c.start == len(TS) // 2
    assert 2 * MiB < c.slope_per_s < 4 * MiB


def test_too_few_samples_or_too_short_a_time_is_no_verdict():
    ys = [900 * MiB + 50 * MiB * i for i in range(MIN_SAMPLES - 1)]
    assert creep(TS[:len(ys)], ys) is None
    fast = [0.1 * i for i in range(100)]  # 100 samples over 10 s
    assert creep(fast, [900 * MiB + 5 * MiB * i for i in range(100)]) is None


def test_a_tiny_creep_is_not_named():
    assert creep(TS, [900 * MiB + 10_000 * t for t in TS]) is None  # 1.2 MB in two minutes


@settings(max_examples=40, deadline=None)
@given(level=st.integers(100 * MiB, 8 << 30), sd=st.floats(0.5 * MiB, 64 * MiB), seed=st.integers(0, 10**6))
def test_noise_around_a_level_is_never_a_leak(level, sd, seed):
    assert creep(TS, _noisy(lambda t: level, sd, seed)) is None


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.5 * MiB, 50 * MiB), seed=st.integers(0, 10**6))
def test_a_ramp_above_its_noise_is_found_at_its_rate(rate, seed):
    c = creep(TS, _noisy(lambda t: 2000 * MiB + rate * t, rate, seed))  # noise: one second's growth
    assert c is not None and abs(c.slope_per_s - rate) < 0.15 * rate


# ---------------------------------------------------------------- the reduced run


def _run(rss, limit: int | None = None, world: int = 1) -> RunState:
    """A run of ``world`` ranks (pid 100 + rank), one step and one process-tree sample a second;
    ``rss(rank, i)`` the rank's RSS at second i."""
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "train.py"], cwd="/work/job", warmup_steps=2))
    for r in range(world):
        s.apply(ev.ProcessAttached(t=0.1, pid=100 + r, rank=r, argv=["train.py", "--x"]))
    if limit is not None:
        s.apply(_Cgroup(t=0.2, limit_bytes=limit))
    for i in range(len(TS)):
        for r in range(world):
            s.apply(ev.StepEnded(t=1.0 + i, pid=100 + r, step=i, duration_s=1.0, data_wait_s=0.0))
        s.apply(dev.ProcessTreeSample(t=1.5 + i, root_pid=100, processes=[
            dev.ProcessInfo(pid=100 + r, role="main", rss=int(rss(r, i))) for r in range(world)],
            total_rss=int(sum(rss(r, i) for r in range(world)))))
    return s


@dataclass(frozen=True)
class _Cgroup(ev.Event):
    """The fields of collectors/cgroup_memory.py's ``cgroup_memory`` event the memory reducer reads."""

    kind: ClassVar[str] = "cgroup_memory"
    limit_bytes: int | None = None
    usage_bytes: int | None = None
    limit_path: str = "/job-7"


def test_the_leaking_rank_is_named_with_its_rate_step_and_the_hosts_memory():
    r = random.Random(3)
    st_ = _run(lambda rank, i: 1000 * MiB + (3 * MiB * i if rank == 1 else 0) + r.gauss(0, MiB), world=2)
    st_.apply(dev.HostSample(t=200.0, memory_total=64 << 30, memory_available=21 << 30))
    creep_ = run_figures(st_).memory_creep
    assert creep_ is not None and len(creep_.leaks) == 1 and creep_.series == 2
    leak = creep_.leaks[0]
    assert leak.rank == 1 and leak.pid == 101 and leak.memory == "host_rss"
    assert abs(leak.bytes_per_hour - 3 * MiB * 3600) < 0.1 * 3 * MiB * 3600
    assert abs(leak.bytes_per_step - 3 * MiB) < 0.3 * MiB and leak.kind == "kept-per-step"
    assert leak.since_step is not None and leak.since_step <= 3  # the steady steps from the start
    assert leak.limit == "host memory available" and leak.left_bytes == 21 << 30
    assert abs(leak.hours_to_limit - 2.0) < 0.2  # 21 GiB at ~10.5 GiB an hour
    assert leak.script == "/work/job/train.py" and ".item()" in leak.likely
    assert leak.words.startswith("rank 1 host RSS +11 GiB an hour since step 3, 3.0 MiB a step: at this pace "
                                 "the host's available memory (21 GiB) is used up in about 2.")
    assert creep_.short.startswith("memory creeps: rank 1 host RSS +11 GiB an hour since step 3, host memory used "
                                   "up in about 2")
    summary = run_summary(st_).as_dict()
    assert summary["memory_creep"] == summary["figures"]["memory_creep"]  # one truth
    assert summary["memory_creep"]["leaks"][0]["rank"] == 1


@pytest.mark.skipif("cgroup_memory" not in EVENT_TYPES, reason="no cgroup_memory events in this tree")
def test_the_forecast_is_against_the_cgroups_limit_when_it_has_one():
    r = random.Random(3)
    st_ = _run(lambda rank, i: 1000 * MiB + (3 * MiB * i if rank == 1 else 0) + r.gauss(0, MiB), limit=4 << 30,
               world=2)
    leak = run_figures(st_).memory_creep.leaks[0]
    assert leak.limit == "cgroup memory limit" and leak.limit_bytes == 4 << 30
    # left: 4 GiB less what the processes hold now (~1 GiB + ~1.35 GiB), at 10.5 GiB an hour
    assert 0.1 < leak.hours_to_limit < 0.2
    assert "the cgroup's memory limit (4.0 GiB, 1.7 GiB left) is reached in about 10 min" in leak.words


def test_flat_ranks_name_no_creep_and_the_summary_says_null():
    r = random.Random(4)
    st_ = _run(lambda rank, i: 1000 * MiB + r.gauss(0, 4 * MiB), world=2)
    assert run_figures(st_).memory_creep is None
    assert run_summary(st_).as_dict()["memory_creep"] is None


def test_a_neuroncore_whose_tensors_grow_is_named_with_its_category_and_hbm_share():
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "t.py"], warmup_steps=1))
    s.apply(ev.ProcessAttached(t=0.1, pid=7, rank=0))
    hw = dev.NeuronHardware(device_memory_bytes=32 << 30, cores_per_device=2, device_count=1)
    for i in range(60):
        s.apply(ev.StepEnded(t=1.0 + i, pid=7, step=i, duration_s=1.0, data_wait_s=0.0))
        mem = {"tensors": 2000 * MiB + 8 * MiB * i, "model_code": 300 * MiB, "constants": 50 * MiB}
        s.apply(dev.NeuronSample(t=1.5 + i, hardware_info=hw, cores=[
            dev.NeuronCoreSample(core=0, memory=mem, memory_total=sum(mem.values()), owner_pid=7),
            dev.NeuronCoreSample(core=1, memory={"tensors": 100 * MiB}, memory_total=100 * MiB, owner_pid=7)]))
    leaks = run_figures(s).memory_creep.leaks
    assert [(x.memory, x.device, x.category, x.rank) for x in leaks] == [("neuron", "NeuronCore 0", "tensors", 0)]
    assert leaks[0].limit == "HBM share" and leaks[0].limit_bytes == 16 << 30
    assert "NeuronCore 0's HBM share" in leaks[0].words


def test_a_process_whose_gpu_memory_grows_is_named_against_the_gpus_memory():
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "t.py"], warmup_steps=1))
    s.apply(ev.ProcessAttached(t=0.1, pid=7, rank=2))
    for i in range(60):
        s.apply(ev.StepEnded(t=1.0 + i, pid=7, step=i, duration_s=1.0, data_wait_s=0.0))
        used = 20 * 1024 * MiB + 16 * MiB * i  # the caching allocator's pool, as NVML sees it
        s.apply(dev.GpuSample(t=1.5 + i, gpus=[dev.GpuReading(index=0, memory_total=80 << 30, memory_used=used + MiB)],
                              processes=[dev.GpuProcess(pid=7, gpu=0, used_memory=used)]))
    (leak,) = run_figures(s).memory_creep.leaks
    assert (leak.memory, leak.device, leak.rank, leak.limit, leak.limit_bytes) == ("cuda", "GPU 0", 2, "GPU memory",
                                                                                  80 << 30)
    assert abs(leak.bytes_per_hour - 16 * MiB * 3600) < 1 * MiB * 3600
    assert leak.words.startswith("rank 2 GPU 0 memory +56 GiB an hour since step 2, 16 MiB a step: at this pace "
                                 "GPU 0's memory (59 GiB left) is reached in about 1.1 h; likely device tensors")


def test_a_tree_sampled_at_the_teardown_is_not_what_the_workload_holds():
    r = random.Random(3)
    st_ = _run(lambda rank, i: 1000 * MiB + (3 * MiB * i if rank == 1 else 0) + r.gauss(0, MiB), world=2)
    held = st_.parts.memory.tree_rss
    assert held > 2300 * MiB  # both ranks, at the last steady sample a step followed
    st_.apply(dev.ProcessTreeSample(t=500.0, root_pid=100, processes=[dev.ProcessInfo(pid=100, role="main", rss=MiB)],
                                    total_rss=MiB))  # rank 1 gone: no step follows
    assert st_.parts.memory.tree_rss == held


def test_a_series_is_tested_again_every_few_samples_and_at_the_end_on_all_of_them():
    s = MemorySeries("host_rss", pid=1)
    for i in range(MIN_SAMPLES - 1):  # too few samples yet: no verdict
        s.add(float(i), 900 * MiB + 4 * MiB * i, i)
    assert s.creep() is None
    for i in range(MIN_SAMPLES - 1, MIN_SAMPLES - 1 + RECHECK - 1):
        s.add(float(i), 900 * MiB + 4 * MiB * i, i)
    assert s.creep() is None  # not tested again yet
    assert s.creep(exact=True) is not None  # the run is over: every sample counts
    before = (list(s.ts), s.version)
    for t, y in ((float("nan"), 1.0), (5.0, 1.0), (99.0, float("inf"))):  # not a number, back in time
        s.add(t, y, 0)
    assert (s.ts, s.version) == before
    t = MemorySeries("host_rss", pid=1)
    for i in range(2 * MAX_POINTS + 1):  # halved when full: bounded, the whole span kept
        t.add(float(i), float(i), i)
    assert len(t.ts) <= MAX_POINTS and t.ts[0] == 0.0 and t.ts[-1] >= 2 * MAX_POINTS - 4 and t.stride == 4


def test_a_neuroncore_no_process_owns_is_named_by_its_core_alone():
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "t.py"], warmup_steps=1))
    for i in range(40):
        s.apply(ev.StepEnded(t=1.0 + i, pid=7, step=i, duration_s=1.0, data_wait_s=0.0))
        s.apply(dev.NeuronSample(t=1.5 + i, cores=[dev.NeuronCoreSample(core=5, memory={"tensors": 100 * MiB + 4 * MiB * i})]))
    (leak,) = run_figures(s).memory_creep.leaks
    assert leak.rank is None and leak.pid is None and leak.words.startswith("NeuronCore 5 memory (tensors) +14 GiB an hour")
    assert leak.limit is None and leak.hours_to_limit is None  # no capacity known: no forecast
