"""The step-phase verdict's words (issue 36 item 2), on reduced events: what to try, with the
DataLoader's workers and the host's CPU where the run sampled them (core/figures/phase_verdict.py)."""

from __future__ import annotations

import pytest

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.phase_verdict import LoaderFacts, workers_to_try
from neurondesk.core.figures.phases import recent_step_bars
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.reduce.state import RunState

PID = 9


def tree(t: float, workers: int) -> dev.ProcessTreeSample:
    procs = [dev.ProcessInfo(pid=PID, ppid=1, name="python", role="main", cpu_percent=90.0)]
    procs += [dev.ProcessInfo(pid=100 + i, ppid=PID, name="pt_data_worker", role="dataloader", cpu_percent=60.0)
              for i in range(workers)]
    return dev.ProcessTreeSample(t=t, root_pid=PID, processes=procs, total_cpu_percent=90.0 + 60.0 * workers,
                                 dataloader_workers=workers, dataloader_cpu_percent=60.0 * workers)


def run(wait: float, workers: int | None, host_cpu: float | None, cpus: int | None = 16, ranks: int = 1,
        phases: list[float] | None = None) -> RunState:
    """12 steps of 0.1 s (warm-up 5) per rank, ``wait`` of them for data; a process-tree sample
    and a host sample before each steady step."""
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="v", command=["python", "train.py"], warmup_steps=5))
    if cpus is not None:
        st.apply(dev.DeviceInventory(t=0.1, cpu=dev.CpuInfo(logical_cores=cpus)))
    for i in range(12):
        t = 1.0 + i
        if workers is not None and i >= 6:
            st.apply(tree(t - 0.5, workers * ranks))
        if host_cpu is not None and i >= 6:
            st.apply(dev.HostSample(t=t - 0.4, cpu_percent=host_cpu))
        for r in range(ranks):
            st.apply(ev.StepEnded(t=t, pid=PID + r * 1000, step=i, duration_s=0.1, data_wait_s=wait,
                                  phases_s=phases or [0, 0.01, 0.01, 0.005, 0, 0]))
    return st


def test_input_bound_names_the_workers_to_try_with_the_workers_and_host_cpu_now():
    p = run_figures(run(0.041, workers=4, host_cpu=35.0)).step_phases
    assert p.verdict == "input-bound"
    assert p.words == ("input-bound: 41% of each step waits for the DataLoader; try num_workers=8 (4 now, "
                       "host CPU 35%)")
    assert (p.num_workers, p.try_num_workers) == (4, 8)


def test_no_workers_loads_in_the_training_process_and_says_so():
    p = run_figures(run(0.07, workers=0, host_cpu=20.0)).step_phases
    assert p.try_num_workers == 4 and p.num_workers == 0
    assert "try num_workers=4 (0 now: batches are loaded in the training process, host CPU 20%)" in p.words


def test_a_busy_host_or_no_core_left_is_told_more_workers_will_not_help():
    busy = run_figures(run(0.05, workers=4, host_cpu=96.0)).step_phases
    assert busy.try_num_workers is None
    assert "more workers will not help (4 now, host CPU 96%, 16 cores)" in busy.words
    assert "cheaper __getitem__" in busy.words
    # 4 ranks on an 8-core host: 1 core each, its training process's: no worker to add
    full = run_figures(run(0.05, workers=2, host_cpu=50.0, cpus=8, ranks=4)).step_phases
    assert full.num_workers == 2 and full.try_num_workers is None and "more workers will not help" in full.words
    # none at all: one worker overlaps the loading with the step however busy the host (a 2-core box at 100%)
    none = run_figures(run(0.09, workers=0, host_cpu=100.0, cpus=2)).step_phases
    assert none.try_num_workers == 1 and "try num_workers=1 (0 now: batches are loaded in the training process, " \
                                          "host CPU 100%)" in none.words


def test_workers_unknown_without_a_process_sample_gives_the_general_advice():
    p = run_figures(run(0.05, workers=None, host_cpu=None)).step_phases
    assert p.num_workers is None and p.try_num_workers is None
    assert "try more DataLoader workers (num_workers)" in p.words


@pytest.mark.parametrize(("share", "now", "cpus", "ranks", "want"), [
    (0.41, 4, 64, 1, 8), (0.5, 2, 64, 1, 5), (0.9, 8, 64, 1, 63), (0.9, 8, 32, 2, 15), (0.3, 1, None, 1, 2),
    (0.3, 15, 16, 1, None),
])
def test_workers_to_try_keeps_up_with_the_step_within_the_cores(share, now, cpus, ranks, want):
    assert workers_to_try(share, LoaderFacts(workers=now, cpus=cpus, ranks_here=ranks)) == want


def test_optimizer_bound_says_how_long_and_what_to_try():
    p = run_figures(run(0.0, None, None, phases=[0, 0.01, 0.02, 0.06, 0, 0])).step_phases
    assert p.verdict == "optimizer-bound"
    assert p.words.startswith("optimizer-bound: the optimizer takes 60% of each step (60.0 ms); try foreach=True")


def test_recent_step_bars_split_each_step_as_the_steady_means_are():
    bars = recent_step_bars(run(0.02, None, None, phases=[0, 0.03, 0.02, 0.01, 0, 0.005]), n=3)
    assert [b.step for b in bars] == [9, 10, 11] and all(b.steady for b in bars)
    parts = {p.name: p.seconds for p in bars[-1].parts}
    assert [p.name for p in bars[-1].parts] == ["input_wait", "forward", "backward", "optimizer", "collective",
                                                "other"]  # in step order; h2d: not on a CPU
    assert parts["other"] == pytest.approx(0.1 - 0.02 - 0.065)
    assert sum(parts.values()) == pytest.approx(0.1)
