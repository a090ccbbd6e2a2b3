"""neuron-ls: the Neuron device inventory, from its JSON (``neuron_ls_json.py``) or the text table.

Every key generation is accepted (NEURON-FORMATS.md §1): the oldest shape (device, bdf,
connected_to, nc_count, memory_size, neuron_processes), 2.25+ (cpu_affinity, numa_node as a
string, neuroncore_ids), instance_type / instance_id in every entry, trn2's
logical_neuroncore_config, and Neuron 2.34's ``--output-format json`` object. Unknown keys and
columns are ignored; missing ones become None. ``run_neuron_ls`` asks ``--output-format json``
(2.34+), then ``--json-output`` (2.22–2.33), then the table.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from neurondesk.collectors.devices import NEURON_BIN_DIR, find_neuron_tool
from neurondesk.collectors.devices.neuron_ls_json import (
    MAX_CORES,
    MAX_JSON_STARTS,
    NeuronLsError,
    _runtime_version,
    as_int,
    parse_embedded_json,
    parse_id_list,
    parse_json,
    parse_memory,
)
from neurondesk.core.events.device_events import NeuronDevice, NeuronInventory, NeuronProcess
from neurondesk.store.input_files import InputRefused, open_regular

# the records live in core (DeviceInventory.neuron carries them); re-exported here with the JSON readers
__all__ = ["MAX_CORES", "MAX_JSON_STARTS", "NeuronDevice", "NeuronInventory", "NeuronLsError", "NeuronLsResult",
           "NeuronProcess", "as_int", "parse_embedded_json", "parse_file", "parse_id_list", "parse_json",
           "parse_memory", "parse_output", "parse_text", "run_neuron_ls"]

NOT_FOUND = "neuron-ls not found on PATH or in /opt/aws/neuron/bin"


class NeuronLsFileTooLarge(NeuronLsError):
    """A --from-file over MAX_FILE_BYTES (/dev/zero, a disk image ...): reading stopped there."""


MAX_FILE_BYTES = 4 << 20  # a neuron-ls output is well under 1 MB


@dataclass(frozen=True)
class NeuronLsResult:
    inventory: NeuronInventory | None
    reason: str | None = None  # why there is no inventory


# ---------------------------------------------------------------- text table


def _column_role(name: str) -> str:
    n = " ".join(name.upper().split())
    for needle, role in (
        ("CORE IDS", "core_ids"),
        ("LOGICAL", "logical_nc"),
        ("CONNECTED", "connected"),
        ("DEVICE", "device"),
        ("CORES", "cores"),
        ("MEMORY", "memory"),
        ("BDF", "bdf"),
        ("AFFINITY", "affinity"),
        ("NUMA", "numa"),
        ("COMMAND", "command"),
        ("RUNTIME", "runtime"),
    ):
        if needle in n:
            return role
    return "pid" if n == "PID" else f"other:{n}"


def _cells(line: str, cuts: list[int]) -> list[str]:
    """Cells of a table row, cut at the border's '+' positions (a COMMAND may contain '|')."""
    n = len(cuts) - 1
    if len(line) >= cuts[-1] and all(line[k] == "|" for k in cuts if k < len(line)):
        return [line[cuts[i] + 1 : cuts[i + 1]].strip() for i in range(n)]
    parts = line.strip("|").split("|")  # wide characters shifted the columns: split instead
    parts = [p.strip() for p in parts] + [""] * n
    return parts[:n]


_BORDER = re.compile(r"\+(?:-+\+)+")


def parse_text(text: str) -> NeuronInventory:
    """The table (and the ``key: value`` lines above its first border); lines before them (a shell
    prompt, warnings) and after the table (package-manager output, the topology) are skipped."""
    lines = [ln.strip() for ln in text.splitlines()]
    meta: dict[str, str] = {}
    i = 0
    while i < len(lines) and not _BORDER.fullmatch(lines[i]):
        key, sep, value = lines[i].partition(":")
        if sep and re.fullmatch(r"[A-Za-z][A-Za-z _-]*", key):
            meta[key.strip().lower().replace("_", "-").replace(" ", "-")] = value.strip()
        i += 1
    if i >= len(lines):
        raise NeuronLsError("no neuron-ls table found")
    cuts = [k for k, c in enumerate(lines[i]) if c == "+"]
    header: list[str] = []
    i += 1
    while i < len(lines) and lines[i].startswith("|"):
        header.append(lines[i])
        i += 1
    if len(cuts) < 2 or not header or i >= len(lines) or not lines[i].startswith("+"):
        raise NeuronLsError("neuron-ls table header not understood")
    header_cells = [_cells(h, cuts) for h in header]
    roles = [_column_role(" ".join(h[c] for h in header_cells)) for c in range(len(cuts) - 1)]
    if "device" not in roles:
        raise NeuronLsError("neuron-ls table has no NEURON DEVICE column")

    rows: list[dict[str, str]] = []
    for line in lines[i + 1 :]:
        if line.startswith("+"):
            continue
        if not line.startswith("|"):
            break  # the topology diagram or anything else after the table
        rows.append(dict(zip(roles, _cells(line, cuts), strict=True)))
    lnc = as_int(meta.get("logical-neuroncore-config"))
    devices, warnings = _devices_from_rows(rows, lnc)
    if lnc is None:
        lnc = next((d.logical_nc_config for d in devices if d.logical_nc_config is not None), None)
    return NeuronInventory(
        devices=devices,
        source="text",
        instance_type=meta.get("instance-type") or None,
        instance_id=meta.get("instance-id") or None,
        logical_nc_config=lnc,
        warnings=warnings,
    )


def _device_lnc(lnc: int | None, logical: int | None, physical: int | None) -> int | None:
    """A device's logical NeuronCore config: the header's, else physical / logical cores (the 2.21
    trn2 table's LOGICAL NC column beside NEURON CORES)."""
    if lnc is not None or not (logical and physical) or physical % logical:
        return lnc
    return physical // logical


def _devices_from_rows(
    rows: list[dict[str, str]], lnc: int | None = None
) -> tuple[list[NeuronDevice], list[str]]:
    built: list[tuple[dict[str, str], list[NeuronProcess]]] = []
    warnings: list[str] = []
    for row in rows:
        if row.get("device"):
            built.append((row, []))
        elif not built:
            warnings.append(f"continuation row before any device: {row}")
            continue
        pid = as_int(row.get("pid", ""))
        if pid is not None or row.get("command"):
            built[-1][1].append(
                NeuronProcess(pid, row.get("command", ""), _runtime_version(row.get("runtime")))
            )
    devices = []
    for row, procs in built:
        index = as_int(row["device"])
        if index is None:
            warnings.append(f"device row skipped, index {row['device']!r} is not a number")
            continue
        lnc_col = as_int(row.get("logical_nc", ""))
        cores = as_int(row.get("cores", ""))
        nc = lnc_col if lnc_col is not None else cores
        ids = parse_id_list(row.get("core_ids", ""))
        if nc is None or not 0 <= nc <= MAX_CORES:
            nc = len(ids)
        devices.append(
            NeuronDevice(
                index=index,
                nc_count=nc,
                core_ids=ids or list(range(index * nc, (index + 1) * nc)),
                memory_bytes=parse_memory(row.get("memory", "")),
                bdf=row.get("bdf") or None,
                cpu_affinity=row.get("affinity") or None,
                numa_node=as_int(row.get("numa", "")),
                connected_to=parse_id_list(row.get("connected", "")),
                processes=procs,
                physical_nc_count=cores if lnc_col is not None else None,
                logical_nc_config=_device_lnc(lnc, lnc_col, cores),
            )
        )
    return devices, warnings


# ---------------------------------------------------------------- detection, files, running


def parse_output(text: str) -> NeuronInventory:
    """JSON or table, wherever it is in ``text`` (a paste: after a prompt or an echoed command,
    between warnings and package-manager lines). Both are tried; NeuronLsError when neither parses."""
    if "level=fatal" in text and "+--" not in text:  # the logfmt error line saved instead of output
        raise NeuronLsError(
            f"this is neuron-ls's error output, not its listing: {' '.join(text.split())[:300]}"
        )
    try:
        found = parse_embedded_json(text)
        if found.devices:
            return found
    except NeuronLsError as e:
        found, json_error = None, str(e)
    else:
        json_error = "a JSON list without devices"
    try:
        return parse_text(text)
    except NeuronLsError as table_error:
        if found is not None:
            return found  # "[]": valid JSON listing no device, and no table either
        raise NeuronLsError(f"neither neuron-ls JSON nor a neuron-ls table (JSON: {json_error}; "
                            f"table: {table_error})") from None


def parse_file(path: str | Path) -> NeuronInventory:
    """A saved ``neuron-ls`` or ``neuron-ls --json-output`` (for ``--from-file``)."""
    p = Path(path)
    try:  # a regular file only (a FIFO would block the open), bounded: /dev/zero must not grow us to gigabytes
        fd = open_regular(p, "a saved neuron-ls output")
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except InputRefused as e:
        raise NeuronLsError(f"{e}; give the file neuron-ls wrote") from None
    except OSError as e:
        raise NeuronLsError(f"{p}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_FILE_BYTES:
        raise NeuronLsFileTooLarge(f"{p}: stopped reading at {MAX_FILE_BYTES >> 20} MiB; a saved neuron-ls "
                                   "output is well under 1 MB: give the file neuron-ls wrote")
    text = data.decode("utf-8", errors="replace")
    try:
        return parse_output(text)
    except NeuronLsError as e:
        raise NeuronLsError(f"{p}: {e}; expected saved neuron-ls output (table or --json-output)") from None


def _run(argv: list[str], timeout: float) -> tuple[int, str, str]:
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    out, err = (b.decode("utf-8", errors="replace") for b in (proc.stdout, proc.stderr))
    return proc.returncode, out, err


JSON_FLAGS = (["--output-format", "json"], ["--json-output"])  # Neuron 2.34+, then 2.22–2.33


def run_neuron_ls(
    binary: str | None = None,
    *,
    search_path: str | None = None,
    bin_dir: str = NEURON_BIN_DIR,
    timeout: float = 20.0,
) -> NeuronLsResult:
    """Run ``neuron-ls --output-format json`` (2.34 dropped ``--json-output``), else
    ``--json-output``, else the plain table (a flag neuron-ls does not know prints its usage on
    stdout); never raises."""
    exe = binary or find_neuron_tool("neuron-ls", search_path, bin_dir)
    if exe is None:
        return NeuronLsResult(None, NOT_FOUND)
    problems: list[str] = []
    try:
        for flags in JSON_FLAGS:
            rc, out, err = _run([exe, *flags], timeout)
            if rc != 0 and not out.strip() and "level=fatal" in err:
                return NeuronLsResult(None, f"Neuron driver not loaded: {' '.join(err.split())}")
            try:
                inv = parse_json(out)
            except NeuronLsError as e:
                problems.append(f"{' '.join(flags)}: {e}")
                continue
            if inv.devices or rc == 0:
                return NeuronLsResult(inv)
        rc, out, err = _run([exe], timeout)
        if rc != 0 and not out.strip():
            detail = " ".join(err.split()) or f"neuron-ls exited with status {rc}"
            return NeuronLsResult(None, f"Neuron driver not loaded: {detail}")
        try:
            return NeuronLsResult(parse_text(out))
        except NeuronLsError as text_error:
            return NeuronLsResult(None, f"neuron-ls output not understood: {'; '.join(problems)}; {text_error}")
    except (OSError, subprocess.SubprocessError) as e:
        return NeuronLsResult(None, f"neuron-ls could not be run: {e}")
