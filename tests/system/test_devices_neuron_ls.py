"""neuron-ls: shipped fixtures, variants composed from the documented schema, garbage, and the
tool run as a real subprocess (fake binaries on a temporary PATH)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import FIXTURES

from neurondesk.collectors.devices.neuron_ls import (
    NOT_FOUND,
    NeuronLsError,
    parse_file,
    parse_json,
    parse_output,
    parse_text,
    run_neuron_ls,
)

GIB = 2**30


def _ls_files(suffix: str) -> list[Path]:
    return sorted(p for p in FIXTURES.glob(f"neuron-ls-*{suffix}") if ".stderr" not in p.name)


def _device_facts(inv):  # what the table and the JSON must agree on (commands: see below)
    return [
        (d.index, d.nc_count, d.core_ids, d.memory_bytes, d.bdf, d.cpu_affinity, d.numa_node,
         d.connected_to, [(p.pid, p.runtime_version) for p in d.processes])
        for d in inv.devices
    ]  # fmt: skip


# ---------------------------------------------------------------- shipped fixtures


@pytest.mark.parametrize("path", _ls_files(".json") + _ls_files(".txt"), ids=lambda p: p.name)
def test_fixture_neuron_ls_every_file_is_consistent(path: Path) -> None:
    inv = parse_file(path)
    assert inv.source == ("json" if path.suffix == ".json" else "text")
    assert inv.devices and not inv.warnings
    ids = [i for d in inv.devices for i in d.core_ids]
    assert len(ids) == len(set(ids)) == inv.total_cores  # global core ids, each once
    for d in inv.devices:
        assert len(d.core_ids) == d.nc_count > 0
        assert d.memory_bytes is not None and d.memory_bytes >= 16 * GIB


@pytest.mark.parametrize("json_path", [p for p in _ls_files(".json") if p.with_suffix(".txt").exists()],
                         ids=lambda p: p.name)
def test_fixture_neuron_ls_table_and_json_agree(json_path: Path) -> None:
    txt = json_path.with_suffix(".txt")
    table, js = parse_file(txt), parse_file(json_path)
    assert _device_facts(table) == _device_facts(js)
    for dt, dj in zip(table.devices, js.devices, strict=True):
        for pt, pj in zip(dt.processes, dj.processes, strict=True):
            assert pj.command.startswith(pt.command.removesuffix("...")), (pt, pj)  # table may truncate


def test_fixture_trn1_2xlarge_json_single_device_details() -> None:
    inv = parse_file(FIXTURES / "neuron-ls-trn1.2xlarge.json")
    (d,) = inv.devices
    assert (d.index, d.nc_count, d.core_ids) == (0, 2, [0, 1])
    assert d.memory_bytes == 32 * GIB
    assert d.connected_to == []  # connected_to: null
    assert d.numa_node == -1  # "-1" is a string in the JSON
    assert d.cpu_affinity == "0-7"
    assert [p.pid for p in d.processes] == [41872, 41873]
    assert {p.runtime_version for p in d.processes} == {"2.27.23"}


def test_fixture_trn1_32xlarge_txt_reads_header_block_and_continuation_rows() -> None:
    inv = parse_file(FIXTURES / "neuron-ls-trn1.32xlarge.txt")
    assert (inv.instance_type, inv.instance_id) == ("trn1.32xlarge", "i-0c5d2e8f4a1b3c7d9")
    assert len(inv.devices) == 16 and inv.total_cores == 32
    last = inv.devices[15]
    assert last.core_ids == [30, 31] and last.connected_to == [11, 14, 3, 12]
    assert last.numa_node == 1 and last.cpu_affinity == "32-63,96-127"
    assert [p.pid for p in last.processes] == [52131, 52132]  # second one from a continuation row
    assert sum(len(d.processes) for d in inv.devices) == 32


def test_fixture_inf2_json_empty_command_is_kept_empty() -> None:
    (d,) = parse_file(FIXTURES / "neuron-ls-inf2.xlarge.json").devices
    assert d.bdf == "0000:00:1f.0"
    assert [(p.pid, p.command) for p in d.processes] == [(4377, "")]


# ---------------------------------------------------------------- composed JSON variants


def test_oldest_json_shape_falls_back_to_device_ordered_core_ids() -> None:
    # Ray's fixture (tools <= 2.24): no cpu_affinity, numa_node, neuroncore_ids; short BDF
    old = [
        {"neuron_device": i, "bdf": f"00:1{e}.0", "connected_to": None, "nc_count": 2,
         "memory_size": 34359738368, "neuron_processes": []}
        for i, e in ((0, "e"), (1, "f"))
    ]  # fmt: skip
    inv = parse_json(json.dumps(old, indent=4))
    assert [d.core_ids for d in inv.devices] == [[0, 1], [2, 3]]
    assert [d.bdf for d in inv.devices] == ["00:1e.0", "00:1f.0"]
    assert all(d.numa_node is None and d.cpu_affinity is None for d in inv.devices)


def test_newest_trn2_json_shape_with_instance_keys_and_int_numa() -> None:
    entries = []
    for dev in range(2):
        entries.append(
            {"instance_type": "trn2.48xlarge", "instance_id": "i-0abc", "neuron_device": dev,
             "bdf": "0000:cc:00.0", "cpu_affinity": "0-47,96-143", "numa_node": dev,  # int, not str
             "connected_to": [1 - dev], "nc_count": 4, "logical_neuroncore_config": 2,
             "memory_size": 103079215104, "neuron_processes": [], "some_future_key": {"x": [1]}}
        )  # fmt: skip
    entries[0]["neuroncore_ids"] = [0, 1, 2, 3]  # the second device leaves it out
    inv = parse_json(json.dumps(entries))
    assert (inv.instance_type, inv.instance_id, inv.logical_nc_config) == ("trn2.48xlarge", "i-0abc", 2)
    assert [d.core_ids for d in inv.devices] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [d.numa_node for d in inv.devices] == [0, 1]
    assert inv.devices[0].memory_bytes == 96 * GIB and inv.total_cores == 8


def test_json_with_nc_count_dropped_counts_core_ids_and_skips_non_objects() -> None:
    entries = json.loads((FIXTURES / "neuron-ls-trn1.2xlarge.json").read_text())
    del entries[0]["nc_count"]
    entries.append("not a device")
    inv = parse_json(json.dumps(entries))
    assert inv.devices[0].nc_count == 2
    assert len(inv.devices) == 1 and inv.warnings == ["entry 1 skipped: not an object"]


# ---------------------------------------------------------------- composed tables

INF2_NO_COMMAND = """\
instance-type: inf2.xlarge
instance-id: i-0123456789abcdef0
+--------+--------+----------+--------+--------------+------+----------+------+---------+
| NEURON | NEURON |  NEURON  | NEURON |     PCI      | PID  |   CPU    | NUMA | RUNTIME |
| DEVICE | CORES  | CORE IDS | MEMORY |     BDF      |      | AFFINITY | NODE | VERSION |
+--------+--------+----------+--------+--------------+------+----------+------+---------+
| 0      | 2      | 0-1      | 32 GB  | 0000:00:1f.0 | 4377 | 0-3      | -1   | 2.28.23 |
+--------+--------+----------+--------+--------------+------+----------+------+---------+
"""

# SDK-LS 2.21 --show-all-procs on trn2 (LOGICAL NC column, short BDF, "NA" runtime), then -t output
TRN2_221_ALL_PROCS = """\
  +--------+--------+---------+--------+---------------+---------+--------+------------------------------------------+---------+
  | NEURON | NEURON | LOGICAL | NEURON |   CONNECTED   |   PCI   |  PID   |                 COMMAND                  | RUNTIME |
  | DEVICE | CORES  |   NC    | MEMORY |    DEVICES    |   BDF   |        |                                          | VERSION |
  +--------+--------+---------+--------+---------------+---------+--------+------------------------------------------+---------+
  | 0      | 8      | 4       | 96 GB  | 12, 3, 4, 1   | cc:00.0 | 268911 | neuron-bench exec --run-as-cc-neff --... | 2.0.0   |
  |        |        |         |        |               |         | 269192 | neuron-ls --show-all-procs               | NA      |
  +--------+--------+---------+--------+---------------+---------+--------+------------------------------------------+---------+
  | 1      | 8      | 4       | 96 GB  | 13, 0, 5, 2   | b5:00.0 | 268911 | neuron-bench exec --run-as-cc-neff --... | 2.0.0   |
  |        |        |         |        |               |         | 269192 | neuron-ls --show-all-procs               | NA      |
  +--------+--------+---------+--------+---------------+---------+--------+------------------------------------------+---------+


  Neuron Device Topology
        *        *
  *--->[ 0 ]<--->[ 1 ]<---*
  | not | a | table | row |
"""

TRN2_IDLE_LNC = """\
instance-type: trn2.48xlarge
instance-id: i-0fedcba9876543210
logical-neuroncore-config: 2
+--------+--------+----------+--------+---------------+--------------+--------------+------+
| NEURON | NEURON |  NEURON  | NEURON |   CONNECTED   |     PCI      |     CPU      | NUMA |
| DEVICE | CORES  | CORE IDS | MEMORY |    DEVICES    |     BDF      |   AFFINITY   | NODE |
+--------+--------+----------+--------+---------------+--------------+--------------+------+
| 0      | 4      | 0-3      | 96 GB  | 12, 3, 4, 1   | 0000:cc:00.0 | 0-47,96-143  | 0    |
| 1      | 4      | 4-7      | 96 GB  | 13, 0, 5, 2   | 0000:b5:00.0 | 0-47,96-143  | 0    |
+--------+--------+----------+--------+---------------+--------------+--------------+------+
"""

OLD_1X_TABLE = """\
+--------+--------+--------+---------+
| NEURON | NEURON | NEURON |   PCI   |
| DEVICE | CORES  | MEMORY |   BDF   |
+--------+--------+--------+---------+
| 0      | 2      | 32 GB  | 10:1c.0 |
| 1      | 2      | 32 GB  | 10:1d.0 |
+--------+--------+--------+---------+
"""


def test_table_without_command_or_connected_columns() -> None:
    inv = parse_text(INF2_NO_COMMAND)
    (d,) = inv.devices
    assert inv.instance_type == "inf2.xlarge"
    assert d.connected_to == [] and d.core_ids == [0, 1] and d.numa_node == -1
    assert [(p.pid, p.command, p.runtime_version) for p in d.processes] == [(4377, "", "2.28.23")]


def test_table_2_21_logical_nc_column_na_runtime_and_topology_after_table() -> None:
    inv = parse_output(TRN2_221_ALL_PROCS)
    assert len(inv.devices) == 2  # the diagram's "| not | a |" line is not a device
    d = inv.devices[1]
    assert (d.nc_count, d.physical_nc_count, d.core_ids) == (4, 8, [4, 5, 6, 7])
    assert d.bdf == "b5:00.0" and d.memory_bytes == 96 * GIB
    assert [(p.pid, p.runtime_version) for p in d.processes] == [(268911, "2.0.0"), (269192, None)]
    assert d.processes[0].command == "neuron-bench exec --run-as-cc-neff --..."


def test_table_idle_without_process_columns_and_lnc_header() -> None:
    inv = parse_text(TRN2_IDLE_LNC)
    assert inv.logical_nc_config == 2 and inv.instance_id == "i-0fedcba9876543210"
    assert [d.processes for d in inv.devices] == [[], []]
    assert [d.core_ids for d in inv.devices] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_oldest_table_with_four_columns() -> None:
    inv = parse_text(OLD_1X_TABLE)
    assert [(d.index, d.core_ids, d.bdf) for d in inv.devices] == [
        (0, [0, 1], "10:1c.0"),
        (1, [2, 3], "10:1d.0"),
    ]
    assert all(d.cpu_affinity is None and d.numa_node is None for d in inv.devices)


def test_table_with_unknown_column_and_pipe_inside_command() -> None:
    text = """\
+--------+--------+--------+---------+-----+-------------------+
| NEURON | NEURON | NEURON |  SHINY  | PID |      COMMAND      |
| DEVICE | CORES  | MEMORY | NEW COL |     |                   |
+--------+--------+--------+---------+-----+-------------------+
| 0      | 2      | 32 GB  | yes     | 7   | sh -c a | b       |
+--------+--------+--------+---------+-----+-------------------+
"""
    (d,) = parse_text(text).devices
    assert [(p.pid, p.command) for p in d.processes] == [(7, "sh -c a | b")]


# ---------------------------------------------------------------- garbage


@pytest.mark.parametrize(
    "text",
    [
        (FIXTURES / "neuron-ls-trn1.2xlarge.json").read_text()[:-40],  # truncated JSON
        "Usage of neuron-ls:\n  -j, --json-output   output in JSON\n",  # usage text
        "x" * (1 << 20),  # a 1 MB line
        "",
        "+---+\n",  # a border and nothing else
    ],
    ids=["truncated-json", "usage", "1MB-line", "empty", "lone-border"],
)
def test_garbage_raises_neuron_ls_error_not_anything_else(text: str) -> None:
    with pytest.raises(NeuronLsError):
        parse_output(text)


def test_parse_file_invalid_utf8_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "saved.txt"
    bad.write_bytes(b"\xff\xfe garbage \x80\n")
    with pytest.raises(NeuronLsError, match="saved.txt"):
        parse_file(bad)
    with pytest.raises(NeuronLsError, match="cannot read"):
        parse_file(tmp_path / "missing.json")


def test_fixture_no_driver_stderr_saved_as_output_says_so() -> None:
    with pytest.raises(NeuronLsError, match="error output.*failed to discover Neuron devices"):
        parse_file(FIXTURES / "neuron-ls-no-driver.stderr.txt")


def test_parse_file_tolerates_invalid_utf8_inside_a_table_command(tmp_path: Path) -> None:
    raw = INF2_NO_COMMAND.encode().replace(b"inf2.xlarge", b"inf2.\xffxlarge")
    saved = tmp_path / "ls.txt"
    saved.write_bytes(raw)
    assert parse_file(saved).instance_type == "inf2.\ufffdxlarge"


# ---------------------------------------------------------------- running the tool (real subprocess)


def _fake_tool(folder: Path, body: str) -> Path:
    folder.mkdir(exist_ok=True)
    exe = folder / "neuron-ls"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return folder


def test_run_reports_not_found(tmp_path: Path) -> None:
    result = run_neuron_ls(search_path=str(tmp_path), bin_dir=str(tmp_path / "nope"))
    assert result.inventory is None and result.reason == NOT_FOUND


def test_run_finds_tool_on_path_and_parses_json(tmp_path: Path) -> None:
    fixture = FIXTURES / "neuron-ls-trn1.32xlarge.json"
    folder = _fake_tool(tmp_path / "bin", f'[ "$1" = "--json-output" ] || exit 9\ncat "{fixture}"\n')
    result = run_neuron_ls(search_path=str(folder), bin_dir=str(tmp_path / "nope"))
    assert result.reason is None and result.inventory is not None
    assert result.inventory.total_cores == 32


def test_run_falls_back_to_bin_dir(tmp_path: Path) -> None:
    fixture = FIXTURES / "neuron-ls-inf2.xlarge.json"
    folder = _fake_tool(tmp_path / "opt", f'cat "{fixture}"\n')
    result = run_neuron_ls(search_path=str(tmp_path / "empty"), bin_dir=str(folder))
    assert result.inventory is not None and result.inventory.devices[0].bdf == "0000:00:1f.0"


def test_run_without_driver_reports_its_stderr(tmp_path: Path) -> None:
    stderr = FIXTURES / "neuron-ls-no-driver.stderr.txt"
    folder = _fake_tool(tmp_path / "bin", f'cat "{stderr}" >&2\nexit 1\n')
    result = run_neuron_ls(str(folder / "neuron-ls"))
    assert result.inventory is None
    assert result.reason == "Neuron driver not loaded: " + stderr.read_text().strip()


def test_run_usage_on_stdout_falls_back_to_the_table(tmp_path: Path) -> None:
    table = FIXTURES / "neuron-ls-trn1.2xlarge.txt"
    body = f'if [ -n "$1" ]; then echo "Usage: neuron-ls [-w] [-a]"; exit 2; fi\ncat "{table}"\n'
    result = run_neuron_ls(str(_fake_tool(tmp_path / "bin", body) / "neuron-ls"))
    assert result.inventory is not None and result.inventory.source == "text"
    assert result.inventory.instance_type == "trn1.2xlarge"


def test_run_output_not_understood_is_a_reason(tmp_path: Path) -> None:
    result = run_neuron_ls(str(_fake_tool(tmp_path / "bin", "echo hello\n") / "neuron-ls"))
    assert result.inventory is None and result.reason.startswith("neuron-ls output not understood")


def test_run_unexecutable_binary_is_a_reason(tmp_path: Path) -> None:
    exe = tmp_path / "neuron-ls"
    exe.write_text("not executable")
    os.chmod(exe, 0o644)
    result = run_neuron_ls(str(exe))
    assert result.inventory is None and result.reason.startswith("neuron-ls could not be run")


def test_parse_file_reads_at_most_4_mib_and_says_why_it_stopped(tmp_path: Path) -> None:
    from neurondesk.collectors.devices.neuron_ls import NeuronLsFileTooLarge

    big = tmp_path / "disk.img"
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # a regular file far over the bound (sparse)
    with pytest.raises(NeuronLsFileTooLarge, match="disk.img: stopped reading at 4 MiB"):
        parse_file(big)
    with pytest.raises(NeuronLsError, match="/dev/zero is a character device, not a regular file"):
        parse_file("/dev/zero")  # endless: refused before a byte is read


def test_cli_devices_from_dev_zero_is_one_line_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    from conftest import REPO, base_env

    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "devices", "--from-file", "/dev/zero"],
                       capture_output=True, text=True, cwd=REPO, env=base_env(tmp_path), timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "neurondesk: /dev/zero is a character device, not a regular file (a saved neuron-ls output is read "
        "only from one); give the file neuron-ls wrote"]


@pytest.mark.parametrize("text", [
    '[{"nc_count": ' + "1" * 4400 + "}]",  # an integer json.loads refuses to convert
    '[{"neuron_device": 0, "nc_count": 1e308}]',
    '[{"neuron_device": 0, "nc_count": 1000000000}]',  # a billion core ids would be built from this
])
def test_absurd_numbers_in_neuron_ls_json_are_refused_or_ignored_never_a_crash_or_a_huge_list(text):
    try:
        inv = parse_json(text)
    except NeuronLsError:
        return
    assert all(len(d.core_ids) <= 4096 for d in inv.devices)


@pytest.mark.parametrize(("old", "new"), [("32 GB ", "1.2.3 "), ("| 0-1      |", "| 0-" + "9" * 30 + " |"),
                                          ("| 0-1      |", "| 0-" + "9" * 4400 + " |")])
def test_absurd_cells_in_a_neuron_ls_table_are_ignored_never_a_crash(old, new):
    text = (FIXTURES / "neuron-ls-trn1.2xlarge.txt").read_text()
    assert old in text
    inv = parse_text(text.replace(old, new))
    assert len(inv.devices) == 1 and len(inv.devices[0].core_ids) <= 4096
