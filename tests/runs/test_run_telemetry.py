"""Telemetry in a real run: host and process-tree samples, a recorded neuron-monitor stream fed
through the real collector (fixture: no Trainium here), and the data-loader verdict in words."""

from __future__ import annotations

from conftest import FIXTURES, TINY_MODEL, needs_xla, neurondesk_run

from neurondesk.core.events import device_events as dev
from neurondesk.core.events.run_events import StepEnded
from neurondesk.core.findings.diagnostics import device_utilization
from neurondesk.core.reduce.state import RunState

MONITOR_FIXTURE = FIXTURES / "neuron-monitor-trn1.jsonl"


@needs_xla
def test_fixture_neuron_monitor_replay_is_journaled_raw_and_host_is_sampled(tmp_path):
    run = neurondesk_run(tmp_path, ["--preset", "demo", *TINY_MODEL, "--steps", "40"],
                         nd_args=["--neuron-monitor-replay", str(MONITOR_FIXTURE)])
    assert run.returncode == 0, run.stderr[-2000:]
    kinds = [e["kind"] for e in run.events]
    assert "device_inventory" in kinds and "host_sample" in kinds and "process_tree" in kinds
    raws = [e["raw"] for e in run.events if e["kind"] == "neuron_sample"]
    expected = [line.rstrip("\n") for line in MONITOR_FIXTURE.read_text().splitlines() if line.strip()]
    assert raws and raws == expected[: len(raws)]  # exact lines, in order: a replay of the journal is exact
    trees = [e for e in run.events if e["kind"] == "process_tree"]
    assert any(p["role"] == "main" for t in trees for p in t["processes"])
    s = run.summary
    assert s["devices"]["neuron_reason"].startswith("neuron-ls not found")
    # the fixture's samples come at their own pace: whether one lands in steady state varies, but a
    # source is named exactly when steady samples were counted, and it is neuron-monitor's
    util = s["device_utilization"]
    if util["samples"]:
        assert util["source"] == "neuron-monitor neuroncore_utilization" and util["mean"] is not None
    else:
        assert util["source"] is None and util["mean"] is None


@needs_xla
def test_slow_loader_is_called_input_bound_with_advice(tmp_path):
    # 300 ms of loader sleep per batch against a tiny model's step of a few ms of compute: the wait dominates
    # the step by construction, even with compute ten times slower on a busy machine
    run = neurondesk_run(tmp_path, ["--preset", "demo", *TINY_MODEL, "--steps", "12", "--loader-delay-ms", "300"])
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    assert s["data_wait_fraction"] >= 0.2
    assert s["input_verdict"] == "input-bound"
    assert s["input_advice"].startswith("input-bound: the loop waits")
    assert "num_workers > 0" in s["input_advice"]


def _steady_state(steps: int = 8, st: RunState | None = None) -> RunState:
    st = RunState() if st is None else st
    for i in range(steps):
        st.apply(StepEnded(t=float(i), pid=1, step=i, duration_s=0.1, samples=8))
    return st


def test_device_utilization_counts_only_steady_samples_of_owned_cores():
    st = RunState()
    core = dev.NeuronCoreSample(core=0, utilization=90.0, owner_pid=7)
    st.apply(dev.NeuronSample(t=0.0, cores=[core]))  # before any step: warm-up, not counted
    _steady_state(st=st)
    st.apply(dev.NeuronSample(t=9.0, cores=[core, dev.NeuronCoreSample(core=1, utilization=10.0, owner_pid=7),
                                            dev.NeuronCoreSample(core=2, utilization=99.0, owner_pid=None)]))
    st.apply(dev.NeuronSample(t=10.0, cores=[dev.NeuronCoreSample(core=0, utilization=20.0, owner_pid=7)]))
    util = device_utilization(st)
    assert util["samples"] == 2
    assert util["mean"] == 35.0  # (mean(90, 10) + 20) / 2; the unowned core 2 is not ours
    assert util["source"] == "neuron-monitor neuroncore_utilization"
