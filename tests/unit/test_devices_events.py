"""The device event kinds: registered, frozen, typed records, and equal after a JSON journal round trip."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from neurondesk.collectors.devices.host import HostSampler, ProcessTreeSampler
from neurondesk.core.events import device_events as de
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.registry import EVENT_TYPES
from neurondesk.core.events.run_events import Event, ParseProblem

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
    assert tree.processes[0].pid == os.getpid() and tree.processes[0].role == "main"


def test_gpu_sample_round_trips_and_is_frozen() -> None:
    g = de.GpuSample(t=1.0, gpus=[de.GpuReading(index=0, name="x", power_w=1.5)], driver="570", processes=[])
    assert _journal(g) == g
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.driver = "other"  # type: ignore[misc]


def test_a_newer_journal_with_extra_keys_still_replays() -> None:
    d = event_to_dict(de.CacheScan(t=1.0, path="/c", exists=True, entries={"done": 1}))
    d["added_in_a_later_version"] = 1
    assert event_from_dict(d) == de.CacheScan(t=1.0, path="/c", exists=True, entries={"done": 1})


def test_journal_objects_become_records_and_records_have_no_raw_keys() -> None:
    """A journal holds the tool's values as JSON objects: the codec builds the records from them.
    Nothing else converts dicts, and a record cannot be read as one."""
    s = event_from_dict({"kind": "neuron_sample", "t": 1.0,
                         "cores": [{"core": 0, "utilization": 90.0, "owner_pid": 7}],
                         "runtimes": [{"pid": 7, "loaded_models": [{"model_id": 1, "cores": [0]}]}]})
    assert s == de.NeuronSample(t=1.0, cores=[de.NeuronCoreSample(core=0, utilization=90.0, owner_pid=7)],
                                runtimes=[de.NeuronRuntimeSample(pid=7, loaded_models=[
                                    de.LoadedModel(model_id=1, cores=[0])])])
    tree = event_from_dict({"kind": "process_tree", "t": 1.0, "processes": [{"pid": 5, "role": "main"}],
                            "compilers": [{"pid": 6, "cmdline": "neuronx-cc compile"}]})
    assert tree.processes == [de.ProcessInfo(pid=5, role="main")]
    assert tree.compilers == [de.CompilerProcess(pid=6, cmdline="neuronx-cc compile")]
    with pytest.raises(TypeError):
        tree.processes[0]["pid"]  # type: ignore[index]
    inv = event_from_dict({"kind": "device_inventory", "t": 1.0, "cpu": {"model": "EPYC", "logical_cores": 2},
                           "neuron": {"devices": [{"index": 0, "nc_count": 2, "core_ids": [0, 1]}],
                                      "source": "json", "total_cores": 2}})
    assert inv.cpu == de.CpuInfo(model="EPYC", logical_cores=2) and inv.neuron.total_cores == 2
    assert isinstance(inv.neuron.devices[0], de.NeuronDevice)
    given = [{"core": 0}]
    assert de.NeuronSample(t=1.0, cores=given).cores is given  # type: ignore[arg-type]  # not converted
