"""The device event kinds: registered, frozen, and equal after a JSON journal round trip."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from neurondesk.collectors.devices.host import HostSampler, ProcessTreeSampler
from neurondesk.core import device_events as de
from neurondesk.core.events import EVENT_TYPES, Event, ParseProblem, event_from_dict, event_to_dict

KINDS = {
    "device_inventory": de.DeviceInventory,
    "neuron_sample": de.NeuronSample,
    "gpu_sample": de.GpuSample,
    "host_sample": de.HostSample,
    "process_tree": de.ProcessTreeSample,
    "cache_scan": de.CacheScan,
}


def test_kinds_are_registered_without_touching_the_existing_ones() -> None:
    for kind, cls in KINDS.items():
        assert EVENT_TYPES[kind] is cls and issubclass(cls, Event)
    assert (
        EVENT_TYPES["parse_problem"] is ParseProblem and len(set(KINDS) & {"step", "compile", "notice"}) == 0
    )


def _journal(e: Event) -> Event:
    return event_from_dict(json.loads(json.dumps(event_to_dict(e))))


def test_real_host_and_process_tree_samples_round_trip() -> None:
    host = HostSampler()
    host.sample()
    tree = ProcessTreeSampler(os.getpid()).sample(t=2.0)
    for event in (host.sample(t=1.0), tree):
        assert _journal(event) == event
    assert tree.processes[0]["pid"] == os.getpid() and tree.processes[0]["role"] == "main"


def test_gpu_sample_round_trips_and_is_frozen() -> None:
    g = de.GpuSample(t=1.0, gpus=[{"index": 0, "name": "x", "power_w": 1.5}], driver="570", processes=[])
    assert _journal(g) == g
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.driver = "other"  # type: ignore[misc]


def test_a_newer_journal_with_extra_keys_still_replays() -> None:
    d = event_to_dict(de.CacheScan(t=1.0, path="/c", exists=True, entries={"done": 1}))
    d["added_in_a_later_version"] = 1
    assert event_from_dict(d) == de.CacheScan(t=1.0, path="/c", exists=True, entries={"done": 1})
