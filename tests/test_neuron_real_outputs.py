"""Issue 10, items 6-9: neuron-monitor and neuron-ls outputs as people pasted them from real
machines (composed fixtures in tests/data/neuron/ showing each shape)."""

from __future__ import annotations

from conftest import FIXTURES

from neurondesk.collectors.devices.neuron_monitor import parse_report
from neurondesk.core.device_events import NeuronSample


def monitor_lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


def sample(line: str, t: float = 1.0) -> NeuronSample:
    event = parse_report(line, t)
    assert isinstance(event, NeuronSample), event
    return event


# ---------------------------------------------------------------- 6. effective_flops


def test_effective_flops_is_read_when_flops_is_absent() -> None:
    s = sample(monitor_lines("neuron-monitor-effective-flops.jsonl")[0])
    assert [c.flops for c in s.cores] == [33071564845056, 32673090011136]


def test_effective_flops_wins_when_a_report_carries_both() -> None:
    s = sample(monitor_lines("neuron-monitor-effective-flops.jsonl")[1])
    assert [c.flops for c in s.cores] == [33071564845056, 32673090011136]
