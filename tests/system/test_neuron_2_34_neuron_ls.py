"""neuron-ls of Neuron 2.34: ``--output-format json`` asked first (2.34 dropped ``--json-output``),
its top level read tolerantly, then ``--json-output``, then the table; each tool a real subprocess
(a fake neuron-ls on a temporary folder). The 2.34 fixture is composed (see
tests/data/neuron/sdk-2.34/README.md): the announcement names the flag and says the format adds
top-level instance and UltraServer fields, not their key names."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES

from neurondesk.collectors.devices.inventory import collect_inventory, format_inventory_text
from neurondesk.collectors.devices.neuron_ls import parse_file, parse_json, run_neuron_ls

NEW = FIXTURES / "sdk-2.34" / "neuron-ls-trn2u.48xlarge-output-format-json.json"
OLD = FIXTURES / "neuron-ls-trn1.2xlarge.json"
TABLE = FIXTURES / "neuron-ls-trn1.2xlarge.txt"


def _tool(folder: Path, *, new: Path | None, old: Path | None, calls: Path) -> str:
    """A neuron-ls that knows ``--output-format json`` only when ``new`` is given and
    ``--json-output`` only when ``old`` is; any other flag prints its usage on stdout."""
    folder.mkdir(exist_ok=True)
    exe = folder / "neuron-ls"
    usage = 'echo "Usage: neuron-ls [-w] [-a] [-t]"; exit 2'
    exe.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{calls}"\n'
        f'if [ "$1" = "--output-format" ] && [ "$2" = "json" ]; then '
        + (f'cat "{new}"; exit 0' if new else usage) + "; fi\n"
        'if [ "$1" = "--json-output" ]; then ' + (f'cat "{old}"; exit 0' if old else usage) + "; fi\n"
        f'if [ -n "$1" ]; then {usage}; fi\n'
        f'cat "{TABLE}"\n')
    exe.chmod(0o755)
    return str(exe)


def test_fixture_2_34_top_level_instance_ultraserver_and_devices() -> None:
    inv = parse_file(NEW)
    assert inv.source == "output-format-json"
    assert (inv.instance_type, inv.instance_id) == ("trn2u.48xlarge", "i-0a1b2c3d4e5f60718")
    assert inv.ultraserver == {"id": "us-0f1e2d3c4b5a69788", "node_count": "4", "node_index": "1"}
    assert len(inv.devices) == 16 and inv.total_cores == 64 and inv.logical_nc_config == 2
    assert inv.devices[0].connected_to == [12, 3, 4, 1] and inv.devices[0].processes[0].pid == 51234
    assert inv.devices[15].core_ids == [60, 61, 62, 63] and inv.devices[15].numa_node == 1


def test_2_34_devices_under_another_key_and_instance_as_an_object() -> None:
    """The key names are composed: devices under any key (or one level down) and an instance
    object are read the same way."""
    doc = json.loads(NEW.read_text())
    devices = doc.pop("neuron_devices")
    for variant in ({"instance": {"type": "trn2.48xlarge", "id": "i-1"}, "neuron": {"devices": devices}},
                    {"instance_info": {"instance_type": "trn2.48xlarge", "instance_id": "i-1"}, "hw": devices}):
        inv = parse_json(json.dumps(variant))
        assert (inv.instance_type, inv.instance_id, len(inv.devices)) == ("trn2.48xlarge", "i-1", 16)
        assert inv.ultraserver == {}


def test_an_object_with_no_device_list_is_refused_in_one_line() -> None:
    try:
        parse_json('{"instance_type": "trn2.48xlarge", "error": "no devices"}')
    except ValueError as e:
        assert "neither a list of devices nor an object holding one" in str(e)
    else:
        raise AssertionError("accepted an object without devices")


def test_run_on_2_34_asks_output_format_json_first(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    result = run_neuron_ls(_tool(tmp_path / "bin", new=NEW, old=None, calls=calls))
    assert result.reason is None and result.inventory is not None
    assert result.inventory.source == "output-format-json" and result.inventory.instance_type == "trn2u.48xlarge"
    assert calls.read_text().splitlines() == ["--output-format json"]


def test_run_on_2_33_falls_back_to_json_output_then_on_older_to_the_table(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    result = run_neuron_ls(_tool(tmp_path / "bin", new=None, old=OLD, calls=calls))
    assert result.inventory is not None and result.inventory.source == "json"
    assert calls.read_text().splitlines() == ["--output-format json", "--json-output"]
    calls.unlink()
    result = run_neuron_ls(_tool(tmp_path / "bin2", new=None, old=None, calls=calls))
    assert result.inventory is not None and result.inventory.source == "text"
    assert result.inventory.instance_type == "trn1.2xlarge"
    assert calls.read_text().splitlines() == ["--output-format json", "--json-output", ""]


def test_devices_command_names_instance_and_ultraserver_from_2_34(tmp_path: Path) -> None:
    d = collect_inventory(neuron_ls=_tool(tmp_path / "bin", new=NEW, old=None, calls=tmp_path / "c"))
    text = format_inventory_text(d)
    assert "Neuron: 16 device(s), 64 NeuronCore(s), LNC=2 on trn2u.48xlarge i-0a1b2c3d4e5f60718" in text
    assert "UltraServer us-0f1e2d3c4b5a69788, node 1 of 4" in text
