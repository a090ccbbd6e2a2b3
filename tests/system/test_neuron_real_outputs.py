"""Issue 10, items 6-9: neuron-monitor and neuron-ls outputs as people pasted them from real
machines (composed fixtures in tests/data/neuron/ showing each shape)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, base_env

from neurondesk.collectors.devices.inventory import collect_inventory, inventory_event
from neurondesk.collectors.devices.neuron_ls import NeuronLsError, parse_file, parse_output
from neurondesk.collectors.devices.neuron_monitor import NeuronMonitorProcess, parse_report
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.device_events import DeviceInventory, NeuronHardware, NeuronSample
from neurondesk.core.events.run_events import Notice, RunStarted
from neurondesk.core.node.prices import bundled_price_table
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.devices_view import device_units, execution_text
from neurondesk.reports.summary_writer import report_rows


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


# ---------------------------------------------------------------- 9. neuron-ls pastes


def test_a_table_after_a_shell_prompt_is_read_as_the_table() -> None:
    inv = parse_file(FIXTURES / "neuron-ls-trn1.32xlarge-after-shell-prompt.paste")
    clean = parse_file(FIXTURES / "neuron-ls-trn1.32xlarge.txt")
    assert inv == clean and inv.source == "text" and inv.total_cores == 32


def test_json_after_an_echoed_command_is_read_as_json() -> None:
    inv = parse_file(FIXTURES / "neuron-ls-inf2.xlarge-after-echoed-command.paste")
    assert inv == parse_file(FIXTURES / "neuron-ls-inf2.xlarge.json") and inv.source == "json"


def test_warnings_before_and_package_manager_lines_after_the_table_are_skipped() -> None:
    inv = parse_file(FIXTURES / "neuron-ls-trn2.48xlarge-warnings-and-package-manager.paste")
    assert inv.instance_type == "trn2.48xlarge" and inv.instance_id is None
    assert len(inv.devices) == 16 and inv.total_cores == 64
    assert inv.devices[15].core_ids == [60, 61, 62, 63] and inv.devices[15].memory_bytes == 96 << 30
    assert inv.logical_nc_config == 2


def test_the_table_fills_each_devices_logical_core_config_as_the_json_does() -> None:
    inv = parse_file(FIXTURES / "neuron-ls-trn2.48xlarge-warnings-and-package-manager.paste")
    assert {d.logical_nc_config for d in inv.devices} == {2}


def test_a_paste_with_neither_table_nor_json_is_refused_with_both_reasons() -> None:
    with pytest.raises(NeuronLsError) as err:
        parse_file(FIXTURES / "neuron-ls-neither-table-nor-json.paste")
    text = str(err.value)
    assert "neither neuron-ls JSON nor a neuron-ls table" in text and "no neuron-ls table found" in text


def test_devices_from_a_file_without_an_output_exits_2_saying_why(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "devices", "--from-file",
                        str(FIXTURES / "neuron-ls-neither-table-nor-json.paste")],
                       capture_output=True, text=True, cwd=REPO, env=base_env(tmp_path), timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert "neither neuron-ls JSON nor a neuron-ls table" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_devices_from_a_pasted_file_exits_0_with_the_devices(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "devices", "--from-file",
                        str(FIXTURES / "neuron-ls-trn1.32xlarge-after-shell-prompt.paste")],
                       capture_output=True, text=True, cwd=REPO, env=base_env(tmp_path), timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("Neuron: 16 device(s), 32 NeuronCore(s)")


# ---------------------------------------------------------------- 8. capacity is not usage

TRN1N = "neuron-monitor-trn1n.32xlarge-memory-in-use.jsonl"
GIB = 1 << 30


def _state(*events) -> RunState:
    st = RunState()
    for e in events:
        st.apply(e)
    return st


def test_per_core_capacity_comes_from_neuron_hardware_info_not_from_the_memory_in_use() -> None:
    kind, units, _ = device_units(_state(sample(monitor_lines(TRN1N)[0])))
    assert kind == "neuron" and len(units) == 32
    assert {u.mem_total for u in units} == {16 * GIB}  # 32 GiB per device / 2 cores
    assert all(8.8 * GIB < u.mem_used < 9 * GIB for u in units)


def test_per_core_capacity_comes_from_neuron_ls_when_there_is_an_inventory() -> None:
    inv = inventory_event(collect_inventory(neuron_ls_file=str(FIXTURES / "neuron-ls-trn1.32xlarge.txt")), t=0.5)
    _, units, _ = device_units(_state(inv, sample(monitor_lines(TRN1N)[1])))  # old tools: no memory size
    assert {u.mem_total for u in units} == {16 * GIB}


def test_capacity_unknown_is_not_made_up_from_usage() -> None:
    _, units, _ = device_units(_state(sample(monitor_lines(TRN1N)[1])))
    assert {u.mem_total for u in units} == {None}


def test_hardware_info_is_a_typed_record_that_survives_the_journal() -> None:
    s = sample(monitor_lines(TRN1N)[0])
    assert s.hardware_info == NeuronHardware(device_type="trainium", device_version="v2", core_version="v2",
                                             device_count=16, device_memory_bytes=32 * GIB, cores_per_device=2,
                                             logical_nc_config=1)
    assert event_from_dict(event_to_dict(s)) == s


# ---------------------------------------------------------------- 7. say what the monitor says

ERRS = "neuron-monitor-execution-errors-ecc-group-errors.jsonl"


def _monitor_events(lines: list[str]) -> list:
    got: list = []
    proc = NeuronMonitorProcess(got.append, ["true"], clock=lambda: 5.0)
    for line in lines:
        proc._line(line.encode() + b"\n")
    return got


def test_group_errors_and_ecc_events_become_notices_once_each() -> None:
    events = _monitor_events(monitor_lines(ERRS))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["NeuronSample", "Notice", "Notice", "NeuronSample", "NeuronSample", "Notice", "Notice"]
    notices = [(n.level, n.source, n.message) for n in events if isinstance(n, Notice)]
    assert notices == [
        ("warn", "neuron-monitor",
         "runtime 41873 neuron_runtime_vcpu_usage: open /proc/41873/stat: no such file or directory"),
        ("warn", "neuron-monitor", "Neuron device 0: ECC events: 2 mem_ecc_corrected"),
        ("warn", "neuron-monitor",
         "runtime 41872 memory_used: failed to read memory usage: resource temporarily unavailable"),
        ("warn", "neuron-monitor", "Neuron device 0: ECC events: 1 mem_ecc_uncorrected"),
    ]


def test_execution_errors_per_second_now_and_totals_in_the_summary() -> None:
    lines = monitor_lines(ERRS)
    st = _state(sample(lines[0], 1.0))
    assert st.neuron.execution_errors_per_s == 2.0  # runtime 41872: 2 failed executions in 1.0 s
    st.apply(sample(lines[1], 2.0))
    assert st.neuron.execution_errors_per_s == 1.0  # runtime 41873: 2 in 2.0 s
    assert "execution errors 1.0/s now, 4 in all" in execution_text(st)
    st.apply(sample(lines[2], 3.0))
    s = run_summary(st, now=4.0)
    assert s.as_dict()["neuron_executions"] == {
        "completed": 5 + 7 + 7 + 6 + 7 + 7, "errors": 4,
        "errors_by_status": {"completed_with_num_err": 1, "timed_out": 1, "failed_to_queue": 2},
        "errors_by_class": {"numerical": 1, "transient": 1, "runtime": 2},
    }
    row = dict(report_rows(s))["Neuron execution errors"]
    assert row == "4 of 43 executions (failed_to_queue 2, completed_with_num_err 1, timed_out 1)"


def test_no_execution_errors_no_line() -> None:
    st = _state(sample(monitor_lines("neuron-monitor-trn1.jsonl")[3]))
    assert execution_text(st) is None


def test_device_and_core_counts_from_neuron_hardware_info_without_neuron_ls() -> None:
    no_ls = DeviceInventory(t=0.5, neuron=None, neuron_reason="neuron-ls not found on PATH or in /opt/aws/neuron/bin")
    st = _state(no_ls, sample(monitor_lines(TRN1N)[0]))
    devices = run_summary(st, now=2.0).as_dict()["devices"]
    assert (devices["neuron_devices"], devices["neuron_cores"]) == (16, 32)
    assert devices["neuron_source"] == "neuron-monitor neuron_hardware_info"
    with_ls = inventory_event(collect_inventory(neuron_ls_file=str(FIXTURES / "neuron-ls-trn1.32xlarge.txt")), t=0.5)
    devices = run_summary(_state(with_ls, sample(monitor_lines(TRN1N)[0])), now=2.0).as_dict()["devices"]
    assert devices["neuron_source"] == "neuron-ls" and devices["neuron_cores"] == 32


def test_instance_info_prices_the_run_when_nothing_else_named_the_instance() -> None:
    started = RunStarted(t=0.0, run_id="r", command=["python"], price_source="instance type unknown (not on EC2?)")
    st = _state(started, sample(monitor_lines(TRN1N)[0], 1.0))
    row = bundled_price_table().instances["trn1n.32xlarge"]
    assert st.instance_type == "trn1n.32xlarge" and st.price_per_hour == row.price_per_hour
    assert "instance type from neuron-monitor instance_info" in st.price_source


def test_instance_info_never_overrides_a_given_instance_type_or_price() -> None:
    for given in ({"instance_type": "trn1.2xlarge"}, {"price_per_hour": 1.5, "price_source": "--price-per-hour"}):
        st = _state(RunStarted(t=0.0, run_id="r", command=["python"], **given), sample(monitor_lines(TRN1N)[0], 1.0))
        assert st.instance_type == given.get("instance_type")
        assert "instance_info" not in (st.price_source or "")


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("neuron-ls-*.paste")))
def test_cut_or_garbled_pastes_are_read_or_refused_never_raise_otherwise(name: str) -> None:
    text = (FIXTURES / name).read_text()
    variants = [text[:cut] for cut in range(0, len(text), max(1, len(text) // 97))]
    variants += [text.replace("[", "[" * 5000, 1), "[" * 100_000 + text, text.replace("|", "\x00")]
    for variant in variants:
        try:
            parse_output(variant)
        except NeuronLsError:
            pass
