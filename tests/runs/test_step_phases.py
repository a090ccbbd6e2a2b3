"""Step phases (issue 36 item 1-2): the steady step split into its phases, on real runs.

- eager on the CPU with a slow DataLoader (the workload sleeps per batch): forward, backward and
  optimizer are timed, h2d is null (no device copy), the phases add up to the mean steady step
  within 5% and the verdict is input-bound with the DataLoader's next step;
- XLA on the CPU (PJRT_DEVICE=CPU): forward / backward / optimizer are null (lazy tensors only trace
  on the host), host tracing and the wait at the sync are timed and, with the data wait, account for
  the step: they add up to it within 5% with little left over.
The verdict's words are checked on reduced events (no process needed)."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import TINY_MODEL, base_env, needs_xla, neurondesk_run

from neurondesk.core.events import run_events as ev
from neurondesk.core.figures.phases import step_parts
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.reduce.state import RunState

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
ARGS = ["--preset", "demo", *TINY_MODEL, "--save-every", "0"]


def _adds_up(p: dict) -> float:
    parts = [p[k] for k in ("input_wait", "h2d", "forward", "backward", "optimizer", "collective", "host_tracing",
                            "device_wait", "other") if p[k] is not None]
    assert all(x >= 0 for x in parts), p
    return sum(parts) / p["step_s"]


@pytest.fixture(scope="module")
def eager_input_bound(tmp_path_factory):
    # One intra-op thread: on a loaded machine OpenMP's spinning threads made the tiny model's
    # forward take most of a 150 ms step once (CI: "compute-bound", which that run then was).
    tmp = tmp_path_factory.mktemp("eager")
    env = {**base_env(tmp), "OMP_NUM_THREADS": "1"}
    return neurondesk_run(tmp, [*ARGS, "--device", "cpu", "--steps", "14", "--loader-delay-ms", "300"], env=env)


@pytest.fixture(scope="module")
def xla_run(tmp_path_factory):
    return neurondesk_run(tmp_path_factory.mktemp("xla"), [*ARGS, "--device", "xla", "--steps", "25"])


@needs_torch
def test_an_input_bound_eager_loop_is_split_and_called_input_bound(eager_input_bound):
    run = eager_input_bound
    assert run.returncode == 0, run.stderr[-2000:]
    p = run.summary["step_phases"]
    assert p["backend"] == "eager-cpu" and p["steps"] >= 5
    assert p["h2d"] is None and p["host_tracing"] is None and p["device_wait"] is None
    assert p["forward"] > 0 and p["backward"] > 0 and p["optimizer"] > 0
    assert p["input_wait"] >= 0.29  # the loader sleeps 300 ms a batch
    assert abs(_adds_up(p) - 1) <= 0.05
    assert p["verdict"] == "input-bound" and "num_workers" in p["words"], p
    assert run.summary["figures"]["step_phases"] == p  # one truth: the summary's is the figures'
    last_status = [line for line in run.stderr.splitlines() if " | step " in line][-1]
    top = p["split"][0]
    assert top["name"] == "input_wait" and f"| input-bound (input wait {top['share']:.0%}) |" in last_status
    assert f"neurondesk: {p['words']}" in run.stderr.splitlines()  # the verdict whole among the final lines


@needs_xla
def test_an_xla_run_on_the_cpu_is_tracing_and_device_wait_and_adds_up(xla_run):
    run = xla_run
    assert run.returncode == 0, run.stderr[-2000:]
    p = run.summary["step_phases"]
    assert p["backend"] == "xla" and p["steps"] >= 5
    assert p["forward"] is None and p["backward"] is None and p["optimizer"] is None  # no such time on a lazy device
    assert p["host_tracing"] > 0 and p["device_wait"] > 0
    assert abs(_adds_up(p) - 1) <= 0.05
    assert p["other"] <= 0.2 * p["step_s"]  # the measured phases account for the step
    assert p["verdict"] in ("host-bound", "device-bound", "compute-bound")


def _state(phases: list[float], wait: float, step_s: float = 0.1, xla: bool = False) -> RunState:
    st = RunState()
    for i in range(12):
        st.apply(ev.StepEnded(t=1.0 + i, pid=9, step=i, duration_s=step_s, data_wait_s=wait, phases_s=phases,
                              executions=1 if xla else None))
    return st


@pytest.mark.parametrize(("phases", "wait", "xla", "verdict", "words"), [
    ([0, 0.01, 0.01, 0.005, 0, 0], 0.07, False, "input-bound", "70% of each step waits for the DataLoader"),
    ([0, 0.01, 0.02, 0.06, 0, 0], 0.0, False, "optimizer-bound", "foreach=True or fused=True"),
    ([0, 0.01, 0.01, 0.01, 0, 0.06], 0.0, False, "collective-bound", "torch.distributed"),
    ([0, 0.04, 0.02, 0.01, 0.02, 0], 0.0, True, "host-bound", "tracing takes 70% of the step on XLA"),
    ([0, 0.005, 0.005, 0.0, 0.08, 0], 0.0, True, "device-bound", "80% of the step waits for the device"),
    ([0, 0.04, 0.05, 0.005, 0, 0], 0.0, False, "compute-bound", "forward and backward take 90%"),
    ([0, 0.01, 0.01, 0.01, 0, 0], 0.0, False, "other-bound", "70% of each step is outside"),
])
def test_the_verdict_names_the_phase_that_bounds_the_step(phases, wait, xla, verdict, words):
    p = run_figures(_state(phases, wait, xla=xla)).step_phases
    assert p is not None and p.steps == 7  # steps 5..11: past the warm-up
    assert p.verdict == verdict and words in p.words, p.words
    assert abs(sum(s.seconds for s in p.split) - p.step_s) < 1e-9


def test_a_phase_the_backend_cannot_tell_is_null_not_zero():
    xla = run_figures(_state([0.001, 0.02, 0.02, 0.01, 0.03, 0], 0.01, xla=True)).step_phases
    assert (xla.forward, xla.backward, xla.optimizer) == (None, None, None)
    assert xla.host_tracing == pytest.approx(0.05) and xla.device_wait == pytest.approx(0.03)
    cpu = run_figures(_state([0.001, 0.02, 0.02, 0.01, 0, 0], 0.01)).step_phases
    assert cpu.h2d is None and cpu.host_tracing is None and cpu.forward == pytest.approx(0.02)


def test_the_phases_partition_the_steady_step_shown_even_where_the_mean_and_the_median_part():
    # an input-bound loop whose workers keep most batches ready: two steps of 5 ms for one of 35 ms that
    # waits 30 ms. The steady step shown is the mean (15 ms: the one steady basis, docs/steady-state.md), not
    # the median (5 ms); the phases' means add up to it.
    st = RunState()
    for i in range(35):
        slow = i % 3 == 2
        st.apply(ev.StepEnded(t=1.0 + i, pid=9, step=i, duration_s=0.035 if slow else 0.005,
                              data_wait_s=0.030 if slow else 0.0, phases_s=[0, 0.002, 0.002, 0.0005, 0, 0]))
    f = run_figures(st)
    p = f.step_phases
    assert f.step_time_s == pytest.approx(0.015)
    assert sum(s.seconds for s in p.split) == pytest.approx(f.step_time_s, abs=1e-8)  # never more than the step
    assert p.step_s == pytest.approx(f.step_time_s) and p.mean_step_s == pytest.approx(0.015, rel=0.05)
    wait = next(s for s in p.split if s.name == "input_wait")
    assert wait.share == pytest.approx(p.input_wait / p.step_s, abs=1e-4)  # of the steps' time: 10 of 15 ms
    assert wait.share == pytest.approx(2 / 3, rel=0.05)


def test_timed_phases_that_overlap_past_the_step_are_scaled_into_it():
    # a step whose timed spans add up to 12 ms of a 10 ms step (a span counted in two phases)
    parts = step_parts(0.010, 0.004, [0, 0.004, 0.003, 0.001, 0, 0], False, None)
    assert sum(x.seconds for x in parts) == pytest.approx(0.010)
    assert {x.name: round(x.share, 4) for x in parts}["input_wait"] == pytest.approx(4 / 12, abs=1e-4)
    p = run_figures(_state([0, 0.004, 0.003, 0.001, 0, 0], 0.004, step_s=0.010)).step_phases
    assert sum(s.seconds for s in p.split) == pytest.approx(p.step_s) and p.other == 0.0
