"""Roles of the workload's processes come from what they do: a process that reports steps is a
rank (a torch_xla.launch child looks like a DataLoader worker on its command line), a DataLoader
worker is a child of a rank; the input advice quotes process samples taken in steady state only."""

from __future__ import annotations

import json

from conftest import REPO, neurondesk_run

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import event_from_dict
from neurondesk.core.findings.diagnostics import input_advice
from neurondesk.core.reduce.state import RunState

ROOT, HELPER, CHILD, WORKER = 100, 101, 102, 103
LAUNCH = REPO / "tests" / "data" / "workloads" / "xla_launch_with_loader.py"


def launch_tree(t: float, child_cpu: float, worker_cpu: float) -> dev.ProcessTreeSample:
    """torch_xla.launch as the collector labels it from command lines: the spawned training child
    carries multiprocessing's spawn marker, so it reads "dataloader"."""
    procs = [
        dev.ProcessInfo(pid=ROOT, ppid=1, name="python", role="main", cpu_percent=1.0),
        dev.ProcessInfo(pid=HELPER, ppid=ROOT, name="python", role="helper"),
        dev.ProcessInfo(pid=CHILD, ppid=ROOT, name="python", role="dataloader", cpu_percent=child_cpu),
        dev.ProcessInfo(pid=WORKER, ppid=CHILD, name="pt_data_worker", role="other", cpu_percent=worker_cpu),
    ]
    return dev.ProcessTreeSample(t=t, root_pid=ROOT, processes=procs, total_cpu_percent=1.0 + child_cpu + worker_cpu,
                                 dataloader_workers=1, dataloader_cpu_percent=child_cpu)


def step(i: int, wait: float = 0.06) -> ev.StepEnded:
    return ev.StepEnded(t=float(i), pid=CHILD, step=i, duration_s=0.1, samples=8, data_wait_s=wait)


def test_the_process_that_reports_steps_is_a_rank_and_its_children_are_workers() -> None:
    st = RunState()
    st.apply(launch_tree(0.5, child_cpu=172.0, worker_cpu=0.0))
    assert st.process_tree.dataloader_workers == 1  # no step yet: the command line's word stands
    st.apply(step(0))
    st.apply(launch_tree(1.5, child_cpu=90.0, worker_cpu=40.0))
    roles = {p.pid: p.role for p in st.process_tree.processes}
    assert roles == {ROOT: "main", HELPER: "helper", CHILD: "rank", WORKER: "dataloader"}
    assert st.process_tree.dataloader_workers == 1 and st.process_tree.dataloader_cpu_percent == 40.0


def test_input_advice_ignores_samples_from_warmup_and_teardown() -> None:
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=2))
    for i in range(12):  # steps 0 and 1 warm up; a sample after step i is steady from i = 2
        warm = i < 2
        st.apply(step(i))
        st.apply(launch_tree(i + 0.5, child_cpu=172.0 if warm else 100.0, worker_cpu=0.0 if warm else 30.0))
    st.apply(step(12))
    st.apply(launch_tree(12.5, child_cpu=172.0, worker_cpu=0.0))  # teardown: no step follows
    steady = st.parts.telemetry.steady_processes
    assert steady.samples == 10 and steady.dataloader_workers == 1
    advice = input_advice(st)
    assert "workload CPU 131% of one core" in advice and "1 DataLoader workers at 30%" in advice, advice
    assert "172" not in advice


def test_input_advice_without_a_steady_sample_quotes_no_process_figures() -> None:
    st = RunState()
    st.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=5))
    st.apply(launch_tree(0.5, child_cpu=172.0, worker_cpu=0.0))
    st.apply(step(1))
    advice = input_advice(st)
    assert "workload CPU" not in advice and "DataLoader workers" not in advice, advice


def test_a_real_torch_xla_launch_child_is_a_rank_and_its_loader_worker_a_worker(tmp_path) -> None:
    run = neurondesk_run(tmp_path, ["60"], workload=LAUNCH, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    events = [event_from_dict(json.loads(line)) for line in (run.run_dir / "events.jsonl").open()]
    step_pids = {e.pid for e in events if isinstance(e, ev.StepEnded)}
    assert len(step_pids) == 1
    st = RunState()
    roles: dict[int, str] = {}
    for e in events:
        st.apply(e)
        if isinstance(e, dev.ProcessTreeSample) and st.parts.procs.step_pids:
            roles.update({(p.pid, p.ppid): p.role for p in st.process_tree.processes if p.role != "helper"})
    (rank,) = step_pids
    assert {k: r for k, r in roles.items() if k[0] == rank} == {(rank, k[1]): "rank" for k in roles if k[0] == rank}
    assert {r for (_, ppid), r in roles.items() if ppid == rank} == {"dataloader"}
    steady = st.parts.telemetry.steady_processes
    assert steady.samples >= 1 and steady.dataloader_workers == 1
    assert "1 DataLoader workers" in run.summary["input_advice"], run.summary["input_advice"]
