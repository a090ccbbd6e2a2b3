"""A death explained (core/findings/crash.py): each kind told by what a dying run leaves (its stderr through the real
log parsers, torchrun's report, the cgroup's counts), with what to try. The real deaths (a cgroup's OOM
killer, a segfault, a NaN stop) are in tests/runs/test_crash_runs.py."""

from __future__ import annotations

from conftest import DATA, FIXTURES

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.findings.crash import TRY, crash_of
from neurondesk.core.findings.neuron_errors import DEVICE_OOM_FIX
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.run_view import view_of
from neurondesk.reports.html_report import _crash
from neurondesk.reports.summary_writer import to_markdown
from neurondesk.views.headless import status_line

CRASH = DATA / "crash"


def died(stderr: list[str], exit_code: int | None = 1, *extra: ev.Event, steps: int = 3) -> RunState:
    """A run of ``steps`` steps whose stderr was ``stderr`` (through the real log parsers), then ``extra``,
    then its end with that stderr's tail."""
    s = RunState()
    s.apply(ev.RunStarted(t=1.0, run_id="r", command=["python", "train.py"]))
    s.apply(ev.ProcessAttached(t=1.1, pid=7))
    for i in range(steps):
        s.apply(ev.StepEnded(t=2.0 + i, pid=7, step=i, duration_s=0.5))
    parser = OutputParser()
    t = 10.0
    for line in stderr:
        t += 0.01
        for e in parser.feed("stderr", line, t):
            s.apply(e)
    for e in parser.flush(t + 0.01):
        s.apply(e)
    for e in extra:
        s.apply(e)
    s.apply(ev.RunFinished(t=20.0, exit_code=exit_code, signal=None if exit_code is None or exit_code >= 0 else
                           {-9: "SIGKILL", -11: "SIGSEGV", -6: "SIGABRT"}[exit_code], stderr_tail=stderr[-40:]))
    return s


def lines(name: str, folder=CRASH) -> list[str]:
    return (folder / name).read_text().splitlines()


def test_a_run_that_ended_well_has_no_crash():
    assert crash_of(died([], 0)) is None
    assert run_summary(died([], 0)).as_dict()["crash"] is None


def test_neuron_device_oom_from_the_runtime_lines_with_the_neuron_advice():
    c = crash_of(died(lines("runtime-device-oom-burst-two-ranks.log", FIXTURES)))
    assert c.kind == "device-oom"
    assert "Failed to alloc DEVICE memory" in c.evidence
    assert c.try_next == DEVICE_OOM_FIX.removeprefix("try ")
    assert c.step == 3 and c.finding.startswith("at step 3, the workload ran out of device memory")


def test_cuda_oom_torch2_message_gives_the_gpu_memory_against_its_capacity():
    c = crash_of(died(lines("cuda-oom-torch2.stderr")))
    assert c.kind == "device-oom" and c.try_next == TRY["cuda-oom"]
    m = c.device_memory
    assert m.what == "GPU 0" and m.limit_bytes == int(79.19 * 2**30)
    assert m.used_bytes == int(79.19 * 2**30) - int(1.25 * 2**30)
    assert "tried to allocate 2.0 GiB more" in m.words


def test_cuda_oom_torch1_wording_too():
    c = crash_of(died(lines("cuda-oom-torch1.stderr")))
    assert c.kind == "device-oom"
    assert c.device_memory.limit_bytes == int(15.78 * 2**30)


def test_gloo_timeout_recorded_from_a_real_run_is_a_collective_timeout():
    c = crash_of(died(lines("gloo-timeout-rank0.stderr")))
    assert c.kind == "collective-timeout"
    assert "Timed out waiting 2000ms for recv operation" in c.evidence
    assert "drop_last" in c.try_next and "timeout" in c.try_next


def test_nccl_watchdog_timeout_is_a_collective_timeout():
    c = crash_of(died(lines("nccl-watchdog-timeout.stderr"), -6))
    assert c.kind == "collective-timeout" and "Watchdog caught collective operation timeout" in c.evidence


def cgroup(oom_kills: int, limit: int | None = 64 << 20) -> dev.CgroupMemory:
    return dev.CgroupMemory(t=19.9, pid=7, path="/job-7", version=2, limit_bytes=limit, limit_path="/job-7",
                            usage_bytes=1 << 20, peak_bytes=limit, oom_kills=oom_kills, limit_hits=40,
                            host_oom_kills=oom_kills, final=True)


def test_sigkill_with_an_oom_kill_counted_is_the_oom_killer_with_the_limit():
    tree = dev.ProcessTreeSample(t=19.0, root_pid=7, processes=[dev.ProcessInfo(pid=7, role="main", rss=60 << 20)],
                                 total_rss=60 << 20)
    after = dev.ProcessTreeSample(t=19.95, root_pid=7, root_alive=False)  # the sample after its death: empty
    c = crash_of(died([], -9, tree, after, cgroup(1)))
    assert c.kind == "oom-killer" and c.signal == "SIGKILL"
    assert c.host_memory.limit_bytes == 64 << 20 and c.host_memory.what == "cgroup /job-7"
    assert "64.0 MiB of its 64.0 MiB limit" in c.finding and "RSS was 60.0 MiB" in c.finding
    assert "DataLoader workers" in c.try_next


def test_sigkill_without_an_oom_kill_is_killed_by_someone():
    c = crash_of(died([], -9, cgroup(0, limit=None)))
    assert c.kind == "killed" and "no OOM kill counted" in c.finding
    assert c.try_next == TRY["killed"]


def test_a_rank_killed_by_the_oom_killer_under_torchrun_while_the_other_timed_out():
    """torchrun's report names the rank SIGKILLed first; the survivor's gloo timeout is a consequence."""
    def tree(t: float, rss: int) -> dev.ProcessTreeSample:  # rank 1's RSS as it dies: 0 in the last sample
        return dev.ProcessTreeSample(t=t, root_pid=6, processes=[dev.ProcessInfo(pid=6, role="main", rss=1 << 20),
                                                                dev.ProcessInfo(pid=8, role="rank", rss=rss)])
    report = ev.RankExited(t=15.0, rank=1, exit_code=-9, pid=8, signal="SIGKILL", root_cause=True)
    c = crash_of(died(lines("gloo-timeout-rank0.stderr"), 1, tree(13.0, 2 << 30), tree(14.0, 0), report, cgroup(1)))
    assert (c.kind, c.rank, c.pid) == ("oom-killer", 1, 8)
    assert "rank 1 was killed by the kernel's OOM killer" in c.finding and "its RSS was 2.0 GiB" in c.finding


def test_a_shell_wrappers_137_is_a_sigkill():
    c = crash_of(died(["Killed"], 137, cgroup(2)))
    assert c.kind == "oom-killer" and c.signal == "SIGKILL"


def test_a_nan_loss_reported_before_the_end():
    c = crash_of(died([], 1, ev.LossReported(t=5.0, value=2.0, step=1), ev.LossReported(t=6.0, value=float("nan"), step=2)))
    assert c.kind == "nan" and "from step 2" in c.finding and "clip" in c.try_next


def test_a_nan_raise_is_the_root_even_when_a_collective_error_follows():
    stderr = ["Traceback (most recent call last):", '  File "train.py", line 40, in <module>',
              "FloatingPointError: loss is nan at step 12", *lines("gloo-timeout-rank0.stderr")]
    assert crash_of(died(stderr)).kind == "nan"


def test_sigsegv_and_its_advice():
    c = crash_of(died(["Fatal Python error: Segmentation fault"], -11))
    assert c.kind == "segfault" and "PYTHONFAULTHANDLER=1" in c.try_next


def test_an_uncaught_exception_otherwise():
    c = crash_of(died(["Traceback (most recent call last):", '  File "t.py", line 3, in <module>',
                       "KeyError: 'label'"]))
    assert c.kind == "error" and "KeyError" in c.finding


def test_every_output_says_it():
    s = died([], -9, cgroup(1))
    summary = run_summary(s)
    assert summary.crash.kind == "oom-killer"
    assert summary.figures.crash == summary.crash  # one truth: the figure, written whole
    md = to_markdown(summary)
    assert "## How it died" in md and "**oom-killer**" in md and "- try: " in md
    html = _crash(0, summary)
    assert 'data-kind="oom-killer"' in html and "64.0 MiB" in html
    assert "died: oom-killer" in status_line(view_of(s, 21.0))


def test_a_failure_while_the_run_goes_on_is_failed_not_died_in_the_status_line():
    """A launcher may still restart the job (torchrun --max-restarts): until the run ends it has not died."""
    s = RunState()
    s.apply(ev.RunStarted(t=1.0, run_id="r", command=["torchrun", "--max-restarts", "1", "train.py"]))
    s.apply(ev.ProcessAttached(t=1.1, pid=7))
    for i in range(3):
        s.apply(ev.StepEnded(t=2.0 + i, pid=7, step=i, duration_s=0.5))
    s.apply(ev.ProcessFailed(t=6.0, pid=7, error="RuntimeError: boom", step=3))
    live = status_line(view_of(s, 6.5))
    assert "failed: error" in live and "died" not in live
    s.apply(ev.RunFinished(t=7.0, exit_code=1, signal=None, stderr_tail=[]))
    assert "died: error" in status_line(view_of(s, 7.5))


def test_an_exit_0_on_a_nan_loss_or_lightnings_early_stop_on_one_is_a_nan_stop():
    c = crash_of(died([], 0, ev.LossReported(t=6.0, value=float("inf"), step=2)))
    assert c.kind == "nan" and c.finding.startswith("at step 3, the workload stopped on a NaN or infinite loss")
    assert "exited 0" in c.finding
    lightning = ["Monitored metric val_loss = nan is not finite. Previous best value was 0.412. "
                 "Signaling Trainer to stop."]
    assert crash_of(died(lightning, 0)).kind == "nan"
    assert crash_of(died(["all good"], 0, ev.LossReported(t=6.0, value=0.5, step=2))) is None


def test_a_dataloader_worker_killed_by_the_oom_killer():
    stderr = ["Traceback (most recent call last):", '  File "train.py", line 30, in <module>',
              "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. "]
    c = crash_of(died(stderr, 1, cgroup(1)))
    assert c.kind == "oom-killer" and "lost a DataLoader worker to the kernel's OOM killer" in c.finding


def test_the_rss_at_the_end_says_who_held_it():
    P = dev.ProcessInfo
    tree = dev.ProcessTreeSample(t=19.0, root_pid=6, total_rss=6 << 30, processes=[
        P(pid=6, role="main", rss=512 << 20), P(pid=8, role="rank", rss=2 << 30), P(pid=9, role="rank", rss=2 << 30),
        P(pid=10, role="dataloader", rss=768 << 20), P(pid=11, role="dataloader", rss=768 << 20),
        P(pid=12, role="compiler", rss=0)])
    c = crash_of(died([], -9, tree, cgroup(1)))
    assert ("the workload's RSS was 6.0 GiB at the last sample (the main process 512.0 MiB, 2 ranks 4.0 GiB, "
            "2 DataLoader workers 1.5 GiB, 1 compiler 0 B)") in c.finding


def test_a_kill_elsewhere_on_the_host_is_not_this_runs_when_its_cgroup_counted_none():
    c = crash_of(died([], -9, dev.CgroupMemory(t=19.9, pid=7, path="/job-7", version=1, oom_kills=0,
                                               host_oom_kills=3, final=True)))
    assert c.kind == "killed"
    unread = dev.CgroupMemory(t=19.9, pid=7, final=True, host_oom_kills=1, error="no memory cgroup controller ...")
    assert crash_of(died([], -9, unread)).kind == "oom-killer"  # the host's count is all there is
    assert "its cgroup's memory events were not recorded" in crash_of(died([], -9)).finding  # an older journal
