"""A compile wall that empties host memory (issue 52 item 5): 64 ranks compiling at once, each compiler
holding gigabytes, said before the OOM killer ends the job, with how many compile and what to do; said
once per wall (recorder/intake.py), live on the status line and in the Devices panel, from one figure
(core/node/compile_wall.py). Synthetic host and process-tree samples through the real RunState."""

from __future__ import annotations

from pathlib import Path

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.node.compile_wall import WARN_FULL_IN_S, compile_wall_memory
from neurondesk.core.reduce.state import RunState
from neurondesk.core.view.run_view import view_of
from neurondesk.recorder.intake import Intake
from neurondesk.store.rundir import RunPaths
from neurondesk.views.headless import status_line

T0 = 1_790_000_000.0
GIB = 1 << 30


def host(t: float, available: int) -> dev.HostSample:
    return dev.HostSample(t=t, cpu_percent=90.0, memory_total=2048 * GIB, memory_used=2048 * GIB - available,
                          memory_available=available)


def tree(t: float, compilers: int, rss_each: int = 3 * GIB) -> dev.ProcessTreeSample:
    ranks = [dev.ProcessInfo(pid=100 + r, ppid=99, name="python", role="rank", rss=2 * GIB) for r in range(64)]
    cc = [dev.ProcessInfo(pid=1000 + i, ppid=100 + i, name="neuronx-cc", role="compiler", rss=rss_each)
          for i in range(compilers)]
    return dev.ProcessTreeSample(t=t, root_pid=99, processes=ranks + cc, total_rss=sum(p.rss for p in ranks + cc),
                                 compilers=[dev.CompilerProcess(pid=p.pid, cmdline="neuronx-cc compile") for p in cc])


def wall(seconds: int, start_available: int, falling_per_s: int, compilers: int = 64, t0: float = T0) -> list:
    out = []
    for i in range(seconds):
        out += [host(t0 + i, start_available - falling_per_s * i), tree(t0 + i + 0.5, compilers)]
    return out


def reduced(events) -> RunState:
    st = RunState()
    st.apply(ev.RunStarted(t=T0 - 10, run_id="wall", command=["torchrun", "train.py"]))
    for e in events:
        st.apply(e)
    return st


def test_64_compilers_emptying_host_memory_are_said_with_when_how_many_and_what_to_do():
    # 20 GiB left, falling 0.5 GiB a second: gone in about 40 s after the last sample
    st = reduced(wall(10, 25 * GIB, GIB // 2))
    view = view_of(st, T0 + 10)
    f = view.devices.compile_wall
    assert f is not None and f.compilers == 64 and f.compilers_rss == 64 * 3 * GIB
    assert abs(f.falling_bytes_per_s - GIB / 2) < 1 and abs(f.full_in_s - (25 * GIB - 9 * GIB // 2) / (GIB / 2)) < 1e-6
    assert f.words.startswith("host memory: at this rate it is full in about 41 s; 64 compiles in flight "
                              "(their RSS 192.0 GiB, 20.5 GiB available, falling 512.0 MiB/s): fewer compiles at once")
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in f.words and "neuron_parallel_compile" in f.words
    assert "host memory full in about 41 s (64 compiles in flight)" in status_line(view)


def test_no_warning_without_compilers_without_a_fall_or_far_from_empty():
    assert reduced(wall(10, 25 * GIB, GIB // 2, compilers=0)).parts.compile_wall.figure() is None  # not a wall
    assert reduced(wall(10, 25 * GIB, 0)).parts.compile_wall.figure() is None  # flat
    slow = GIB // 100  # 10 MiB/s from 25 GiB: 40 min away
    assert reduced(wall(10, 25 * GIB, slow)).parts.compile_wall.figure() is None
    assert reduced(wall(3, 25 * GIB, GIB // 2)).parts.compile_wall.figure() is None  # 3 samples: too few to fit
    view = view_of(reduced(wall(10, 25 * GIB, 0)), T0 + 10)
    assert view.devices.compile_wall is None and "host memory full" not in status_line(view)


def test_the_rule_says_it_just_within_the_horizon_and_not_past_it():
    mib = 1 << 20

    def falling_to(left_s: float):  # 100 MiB/s, gone ``left_s`` after the last of 10 samples
        return [(T0 + i, int(100 * mib * (left_s + 9 - i))) for i in range(10)]

    near = compile_wall_memory(falling_to(WARN_FULL_IN_S - 10), 4, 0)
    assert near is not None and abs(near.full_in_s - (WARN_FULL_IN_S - 10)) < 0.01
    assert near.when == "4 min" and near.falling_bytes_per_s == 100 * mib
    assert compile_wall_memory(falling_to(WARN_FULL_IN_S + 10), 4, 0) is None


def test_the_recorder_says_it_once_per_wall(tmp_path: Path):
    st = RunState()
    said: list[ev.Event] = []

    def record(e: ev.Event) -> None:
        st.apply(e)
        said.append(e)

    intake = Intake(st, record, lambda: RunPaths(tmp_path))
    record(ev.RunStarted(t=T0 - 10, run_id="wall", command=["torchrun", "train.py"]))
    for e in wall(20, 25 * GIB, GIB // 2):  # one wall
        intake.telemetry(e)
    for e in wall(5, 25 * GIB, 0, compilers=0, t0=T0 + 30):  # it ends: the compilers are gone
        intake.telemetry(e)
    for e in wall(10, 15 * GIB, GIB // 2, t0=T0 + 40):  # a second wall
        intake.telemetry(e)
    notices = [e for e in said if isinstance(e, ev.Notice) and e.source == "compile-wall"]
    assert len(notices) == 2 and all(n.level == "warn" for n in notices)
    assert notices[0].message.startswith("host memory: at this rate it is full in about ")
    assert notices[0].t == T0 + 4  # the fifth host sample: the first four seconds on (MIN_SPAN_S)
    assert notices[1].t >= T0 + 43


def test_in_a_pod_the_cgroup_limit_is_what_runs_out_first_and_is_said_so():
    # the host has 1.5 TiB free and steady; the pod's cgroup allows 400 GiB, and 64 compilers grow 0.5 GiB/s
    # together over the ranks' 128 GiB: the limit is reached long before the host's memory
    st = RunState()
    st.apply(ev.RunStarted(t=T0 - 10, run_id="pod", command=["torchrun", "train.py"]))
    st.apply(dev.CgroupMemory(t=T0 - 5, pid=99, path="/kubepods/pod-1", version=2, limit_bytes=400 * GIB))
    for i in range(10):
        st.apply(host(T0 + i, 1536 * GIB))
        st.apply(tree(T0 + i + 0.5, 64, rss_each=(4 * GIB + i * GIB // 128)))
    f = view_of(st, T0 + 10).devices.compile_wall
    assert f is not None and f.limit == "the workload's cgroup memory limit"
    left = 400 * GIB - (64 * 2 * GIB + 64 * (4 * GIB + 9 * GIB // 128))
    assert f.available == left and abs(f.falling_bytes_per_s - GIB / 2) < 1
    assert f.words.startswith("the workload's cgroup memory limit: at this rate it is reached in about ")
    assert "cgroup memory limit reached in about " in status_line(view_of(st, T0 + 10))
    # the same wall without a limit: the host's memory does not fall, nothing to say
    assert reduced([e for i in range(10) for e in (host(T0 + i, 1536 * GIB),
                                                    tree(T0 + i + 0.5, 64, rss_each=4 * GIB + i * GIB // 128))]
                   ).parts.compile_wall.figure() is None
