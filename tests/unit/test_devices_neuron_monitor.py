"""neuron-monitor: config, tag filter, and the report parser on fixtures, composed variants, garbage."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from conftest import FIXTURES

from neurondesk.collectors.devices.neuron_monitor import (
    MAX_RAW_KEPT,
    generate_config,
    parse_report,
    process_tag,
    tag_filter_for,
    workload_env,
)
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.device_events import NeuronSample
from neurondesk.core.events.run_events import ParseProblem

STREAM = FIXTURES / "neuron-monitor-trn1.jsonl"
LINES = STREAM.read_text().splitlines()


def sample(line: str | bytes, t: float = 1.0) -> NeuronSample:
    event = parse_report(line, t)
    assert isinstance(event, NeuronSample), event
    return event


def report(n: int) -> dict:
    """Line n (1-based) of the trn1 stream, as a dict to compose variants from."""
    return json.loads(LINES[n - 1])


def core(s: NeuronSample, idx: int) -> dict:
    return next(c for c in s.cores if c.core == idx)


# ---------------------------------------------------------------- config and tags


def test_fixture_config_is_what_generate_config_writes() -> None:
    assert generate_config(".*") == json.loads((FIXTURES / "neuron-monitor-config.json").read_text())


def test_config_has_every_group_at_the_given_period_and_the_tag_filter() -> None:
    cfg = generate_config("^x$", period="2s")
    assert cfg["period"] == "2s"
    (runtimes,) = cfg["neuron_runtimes"]
    assert runtimes["tag_filter"] == "^x$"
    assert {m["type"] for m in runtimes["metrics"]} == {
        "neuroncore_counters", "memory_used", "neuron_runtime_vcpu_usage", "execution_stats"
    }  # fmt: skip
    assert {m["type"] for m in cfg["system_metrics"]} == {"vcpu_usage", "memory_info", "neuron_hw_counters"}
    assert all("period" not in m for m in runtimes["metrics"] + cfg["system_metrics"])  # root period wins


def test_workload_env_and_tag_filter_select_exactly_this_run() -> None:
    tag = process_tag("run 2026.01/02:a")
    assert re.fullmatch(r"[A-Za-z0-9_.-]{1,255}", tag)
    assert workload_env(tag) == {"NEURON_PROCESS_TAG": tag}
    rx = re.compile(generate_config(tag_filter_for(tag))["neuron_runtimes"][0]["tag_filter"])
    assert rx.search(tag)
    # neither another run, a pid-tagged runtime, a prefix/suffix, nor a '.'-wildcard lookalike
    for other in ("neurondesk-other", "41872", tag + "x", "x" + tag, tag.replace(".", "X", 1)):
        assert not rx.search(other), other


def test_process_tag_is_capped_at_255() -> None:
    assert len(process_tag("r" * 400)) == 255


# ---------------------------------------------------------------- the shipped stream


def test_fixture_every_line_of_the_stream_is_a_sample_keeping_its_raw_line() -> None:
    samples = [sample(line, float(i)) for i, line in enumerate(LINES)]
    assert [s.raw for s in samples] == LINES
    assert [len(s.runtimes) for s in samples] == [0, 2, 2, 2, 2, 2, 2, 2, 2, 0]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("neuron-monitor-*.jsonl")), ids=lambda p: p.name)
def test_fixture_every_monitor_stream_parses_and_round_trips(path: Path) -> None:
    for line in path.read_bytes().splitlines():
        s = sample(line)
        raw = json.loads(line)
        assert len(s.runtimes) == len(raw["neuron_runtime_data"])
        assert len(s.host_vcpu_busy) == len(raw["system_data"]["vcpu_usage"]["usage_data"])
        assert len(s.ecc) == len(raw["system_data"]["neuron_hw_counters"]["neuron_devices"])
        cores = {
            c
            for rt in raw["neuron_runtime_data"]
            for c in rt["report"]["neuroncore_counters"]["neuroncores_in_use"]
        }
        assert [c.core for c in s.cores] == sorted(int(c) for c in cores)
        assert event_from_dict(json.loads(json.dumps(event_to_dict(s)))) == s


def test_idle_trn1_32xlarge_report_composed_from_the_schema() -> None:
    r = report(10)  # empty runtime list; grow it to 128 vCPUs and 16 devices, older hardware keys
    usage = r["system_data"]["vcpu_usage"]["usage_data"]["0"]
    r["system_data"]["vcpu_usage"]["usage_data"] = {str(i): dict(usage, idle=99.0) for i in range(128)}
    ecc = r["system_data"]["neuron_hw_counters"]["neuron_devices"][0]
    r["system_data"]["neuron_hw_counters"]["neuron_devices"] = [
        dict(ecc, neuron_device_index=i, mem_ecc_corrected=i % 2) for i in range(16)
    ]
    r["neuron_hardware_info"] = {"neuron_device_count": 16, "neuroncore_per_device_count": 2, "error": ""}
    r["instance_info"]["instance_type"] = "trn1.32xlarge"
    s = sample(json.dumps(r))
    assert s.cores == [] and s.runtimes == [] and s.instance_type == "trn1.32xlarge"
    assert len(s.host_vcpu_busy) == 128 and s.host_vcpu_busy["127"] == pytest.approx(1.0)
    assert [e["neuron_device_index"] for e in s.ecc] == list(range(16)) and s.ecc[1]["mem_ecc_corrected"] == 1
    assert s.hardware == {"neuron_device_count": 16, "neuroncore_per_device_count": 2}


def test_fixture_first_report_has_host_data_and_no_runtime() -> None:
    s = sample(LINES[0])
    assert s.cores == [] and s.runtimes == [] and s.executions_completed == 0
    assert s.host_memory_total == 33110204416 and s.host_memory_used == 4215275520
    assert s.host_vcpu["user"] == 19.88
    assert len(s.host_vcpu_busy) == 8 and s.host_vcpu_busy["0"] == pytest.approx(100 - 80.53)
    assert s.instance_type == "trn1.2xlarge"
    assert s.hardware["neuron_device_type"] == "trainium" and s.hardware["neuroncore_per_device_count"] == 2
    assert s.ecc == [{"neuron_device_index": 0, "mem_ecc_corrected": 0, "mem_ecc_uncorrected": 0,
                      "sram_ecc_uncorrected": 0, "sram_ecc_corrected": 0}]  # fmt: skip


def test_fixture_training_report_takes_each_core_from_its_owner() -> None:
    s = sample(LINES[3])  # the report pretty-printed in NEURON-FORMATS.md §2.3
    c0, c1 = core(s, 0), core(s, 1)
    assert (c0.owner_pid, c0.utilization, c0.flops) == (41872, 71.38, 33071564845056)
    assert c0.memory["tensors"] == 6442450944 and c0.memory["model_code"] == 184549376
    assert c0.memory_total == 7163906048  # == that runtime's neuron_device total: not summed
    assert c1.owner_pid == 41873 and c1.owner_tag == "41873"
    rt = next(r for r in s.runtimes if r.pid == 41872)
    assert rt.total_latency["p50"] == 0.144911261 and rt.device_latency["p100"] == 0.139962008
    assert (rt.vcpu_user, rt.vcpu_system) == (64.8, 5.1)
    assert rt.host_memory == 8527872 and rt.host_breakdown["dma_buffers"] == 8388608
    assert rt.loaded_models[0].model_id == 10001 and rt.loaded_models[0].cores == [0]
    assert s.executions_completed == sum(r.executions["completed"] for r in s.runtimes) == 14


def test_fixture_compiling_report_has_null_latencies() -> None:
    s = sample(LINES[1])
    assert all(r.total_latency is None and r.device_latency is None for r in s.runtimes)
    assert [core(s, i).owner_pid for i in (0, 1)] == [41872, 41873]  # runtime memory only


def test_fixture_numerical_error_is_counted_by_class() -> None:
    s = sample(LINES[5])
    assert s.errors_by_class["numerical"] == 1 and sum(s.errors_by_class.values()) == 1
    rt = next(r for r in s.runtimes if r.pid == 41873)
    assert rt.executions["completed_with_num_err"] == 1


def test_fixture_eval_graph_shows_two_loaded_models() -> None:
    rt = next(r for r in sample(LINES[7]).runtimes if r.pid == 41872)
    assert [(m.model_id, m.is_running) for m in rt.loaded_models] == [(10001, True), (10003, False)]


def test_fixture_exited_rank_error_is_collected_not_fatal() -> None:
    s = sample(LINES[8])
    assert s.group_errors == [
        "runtime 41873 neuron_runtime_vcpu_usage: open /proc/41873/stat: no such file or directory"
    ]
    assert core(s, 0).owner_pid == 41872
    assert core(s, 1).owner_pid is None and core(s, 1).utilization == 0.0  # nobody owns it now


def test_fixture_samples_survive_the_journal_round_trip() -> None:
    for line in LINES:
        s = sample(line)
        assert event_from_dict(json.loads(json.dumps(event_to_dict(s)))) == s


# ---------------------------------------------------------------- composed variants


def test_owner_wins_even_when_a_non_owner_reports_nonzero_memory() -> None:
    r = report(4)
    other = r["neuron_runtime_data"][1]["report"]
    other["memory_used"]["neuron_runtime_used_bytes"]["usage_breakdown"]["neuroncore_memory_usage"]["0"][
        "runtime_memory"
    ] = 4096  # a runtime-internal allocation on a core it does not own
    other["neuroncore_counters"]["neuroncores_in_use"]["0"]["neuroncore_utilization"] = 0.5
    c0 = core(sample(json.dumps(r)), 0)
    assert c0.owner_pid == 41872 and c0.utilization == 71.38
    assert c0.memory["runtime_memory"] == 34816  # the owner's value, not 34816 + 4096


def test_older_tools_without_flops_latency_and_new_hardware_keys() -> None:
    r = report(4)
    for rt in r["neuron_runtime_data"]:
        for c in rt["report"]["neuroncore_counters"]["neuroncores_in_use"].values():
            del c["flops"]
        del rt["report"]["execution_stats"]["latency_stats"]
    r["neuron_hardware_info"] = {"neuron_device_count": 1, "neuroncore_per_device_count": 2, "error": ""}
    s = sample(json.dumps(r))
    assert core(s, 0).flops is None and core(s, 0).utilization == 71.38
    assert s.runtimes[0].total_latency is None
    assert s.hardware == {"neuron_device_count": 1, "neuroncore_per_device_count": 2}


def test_added_keys_groups_address_and_k8s_info_are_ignored_or_reported() -> None:
    r = report(4)
    r["brand_new_top_level"] = {"x": 1}
    r["neuron_k8s_info"] = {"period": 1.0, "neuroncores_k8s_info": {}, "error": "no kubelet socket"}
    rt = r["neuron_runtime_data"][0]
    rt["address"] = ""
    rt["report"]["future_group"] = {"period": 1.0, "values": [1, 2], "error": "not supported"}
    rt["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]["new_counter"] = 5
    s = sample(json.dumps(r))
    assert core(s, 0).utilization == 71.38
    assert "neuron_k8s_info: no kubelet socket" in s.group_errors
    assert "runtime 41872 future_group: not supported" in s.group_errors


def test_custom_tag_is_reported_with_its_pid() -> None:
    r = report(4)
    r["neuron_runtime_data"][0]["neuron_runtime_tag"] = "neurondesk-run1"
    r["neuron_runtime_data"][0]["error"] = "runtime went away"
    s = sample(json.dumps(r))
    assert core(s, 0).owner_tag == "neurondesk-run1"
    assert s.group_errors == ["runtime neurondesk-run1 (pid 41872): runtime went away"]


@pytest.mark.parametrize(
    "v3d",
    [
        {"nc_v3.0": {"neuroncore_utilization": 80.0}, "nc_v3.1": {"neuroncore_utilization": 60.0}},
        {"nc_v3": {"0": {"neuroncore_utilization": 80.0}, "1": {"neuroncore_utilization": 60.0}}},
    ],
    ids=["sdk-doc-form", "third-party-form"],
)
def test_trn2_v3d_both_forms(v3d: dict) -> None:
    r = report(4)
    r["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]["v3d"] = v3d
    assert core(sample(json.dumps(r)), 0).v3d == {"0": 80.0, "1": 60.0}


def test_empty_runtime_list_and_missing_system_data() -> None:
    s = sample(json.dumps({"neuron_runtime_data": []}))
    assert s.cores == [] and s.host_memory_total is None and s.instance_type is None


OWNED = [(0, 41872, 71.38), (1, 41873, 70.52)]  # report(4)'s cores: (core, owner pid, utilization)


@pytest.mark.parametrize(
    ("mutate", "cores", "runtimes", "errors"),
    [
        # the junk counters lose core 0's utilization only; its owner still comes from its memory
        (lambda r: r["neuron_runtime_data"][0]["report"]["neuroncore_counters"].update(neuroncores_in_use="oops"),
         [(0, 41872, 0.0), OWNED[1]], 2, []),
        (lambda r: r["neuron_runtime_data"].append(17), OWNED, 2, ["neuron_runtime_data entry is not an object"]),
        (lambda r: r["neuron_runtime_data"][0]["report"]["memory_used"].update(loaded_models=[None, {"x": 1}]),
         OWNED, 2, []),
        (lambda r: r["system_data"]["vcpu_usage"]["usage_data"].update({"0": "busy"}), OWNED, 2, []),
        (lambda r: r.update(neuron_runtime_data={"not": "a list"}), [], 0, []),
        (lambda r: r["neuron_runtime_data"][0]["report"]["execution_stats"].update(latency_stats=[1]),
         OWNED, 2, []),
    ],
    ids=["counters-str", "runtime-int", "models-junk", "vcpu-str", "runtimes-dict", "latency-list"],
)
def test_wrong_types_inside_a_report_lose_only_what_they_touch(mutate, cores, runtimes, errors) -> None:
    r = copy.deepcopy(report(4))
    mutate(r)
    event = parse_report(json.dumps(r), 1.0)
    assert isinstance(event, NeuronSample)
    assert [(c.core, c.owner_pid, c.utilization) for c in event.cores] == cores
    assert len(event.runtimes) == runtimes and event.group_errors == errors
    assert event.host_memory_total == 33110204416  # untouched parts are all still read
    assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event


# ---------------------------------------------------------------- garbage


def test_truncated_json_is_a_parse_problem_keeping_the_raw_line() -> None:
    cut = LINES[3][: len(LINES[3]) // 2]
    p = parse_report(cut + "\n", 2.5)
    assert isinstance(p, ParseProblem)
    assert (p.source, p.raw, p.t) == ("neuron-monitor", cut, 2.5)
    assert p.error.startswith("not JSON")


def test_invalid_utf8_is_a_parse_problem_with_the_bytes_escaped() -> None:
    p = parse_report(b'{"neuron_runtime_data": [], "x": "\xff\xfe"}\n', 1.0)
    assert isinstance(p, ParseProblem) and "not UTF-8" in p.error
    assert "\\xff\\xfe" in p.raw


def test_one_megabyte_line_is_kept_up_to_the_cap() -> None:
    p = parse_report("{" + "a" * (1 << 20), 1.0)
    assert isinstance(p, ParseProblem)
    assert len(p.raw) == MAX_RAW_KEPT and f"line of {(1 << 20) + 1} characters" in p.error


def test_a_valid_one_megabyte_report_is_still_a_sample() -> None:
    r = report(4)
    r["padding"] = "p" * (1 << 20)  # an unknown key carrying a lot
    assert sample(json.dumps(r)).cores


@pytest.mark.parametrize("line", ["[]", "42", '"text"', '{"unrelated": 1}', "[" * 200_000, "null"])
def test_json_that_is_not_a_report_is_a_parse_problem(line: str) -> None:
    assert isinstance(parse_report(line, 1.0), ParseProblem)


@pytest.mark.parametrize("line", ["", "\n", "   \r\n", b"\n"])
def test_blank_lines_are_skipped(line: str | bytes) -> None:
    assert parse_report(line, 1.0) is None


def test_a_junk_subfield_loses_only_that_field() -> None:
    r = report(4)
    r["neuron_runtime_data"][0]["report"]["memory_used"]["loaded_models"] = 5
    r["system_data"]["neuron_hw_counters"]["neuron_devices"] = "n/a"
    s = sample(json.dumps(r))
    assert s.runtimes[0].loaded_models == [] and s.ecc == []
    assert core(s, 0).utilization == 71.38 and s.host_memory_total == 33110204416
