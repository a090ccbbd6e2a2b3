"""PyTorch Flight Recorder dump files of one node, read for core/flight_recorder.py.

Where they come from: torch's NCCL watchdog writes one per rank on a collective timeout when
``TORCH_FR_BUFFER_SIZE`` (older: ``TORCH_NCCL_TRACE_BUFFER_SIZE``) is set and
``TORCH_NCCL_DUMP_ON_TIMEOUT`` is on, to ``TORCH_FR_DUMP_TEMP_FILE<rank>`` (default
``/tmp/nccl_trace_rank_<rank>``), as a pickle; a program can write its own as JSON with
``torch._C._distributed_c10d._dump_fr_trace_json()``. Under gloo (torch 2.9, checked here with a
real torchrun hang) the recorder records every collective but writes nothing on a timeout: only
the program's own dump exists. A pickle is read with no class allowed (the dump is plain dicts,
lists, strings and numbers), so reading one runs no code. The rank is the file name's last number.

Refusal: a file that is a link, too big, or neither JSON nor a plain pickle is skipped with the
reason in ``problems``; nothing raises.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.core.flight_recorder import RankRecord, hang_words, read_record

MAX_BYTES = 64 << 20
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
_RANK = re.compile(r"(\d+)(?:\.json|\.pkl)?$")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ARG002 - refuses every class
        raise pickle.UnpicklingError(f"{module}.{name}: a Flight Recorder dump holds no objects")


@dataclass
class NodeDumps:
    records: list[RankRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "path: why", for each file skipped

    def words(self, node: str) -> str | None:
        return hang_words(node, self.records)


def _load(path: Path) -> dict:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"over {MAX_BYTES >> 20} MiB")
    try:
        got = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        got = _PlainUnpickler(io.BytesIO(data)).load()
    if not isinstance(got, dict):
        raise ValueError("not a Flight Recorder dump (no object at its top)")
    return got


def read_dumps(paths: list[Path]) -> NodeDumps:
    out = NodeDumps()
    for path in sorted(paths):
        m = _RANK.search(path.name)
        if m is None:
            out.problems.append(f"{path}: no rank in its name")
            continue
        try:
            out.records.append(read_record(int(m.group(1)), _load(path)))
        except (OSError, ValueError, pickle.UnpicklingError, EOFError) as e:
            out.problems.append(f"{path}: {e.strerror if isinstance(e, OSError) and e.strerror else e}")
    return out


def dump_paths(env: dict[str, str], folder: Path | None = None) -> list[Path]:
    """The dump files the run's environment points at (``TORCH_FR_DUMP_TEMP_FILE``, else torch's
    default prefix), and those in ``folder`` (a program's own JSON dumps)."""
    prefix = Path(env.get("TORCH_FR_DUMP_TEMP_FILE") or DEFAULT_PREFIX)
    found = [p for p in prefix.parent.glob(prefix.name + "*") if _RANK.search(p.name)] if prefix.parent.is_dir() else []
    if folder is not None and folder.is_dir():
        found += [p for p in folder.iterdir() if p.suffix in (".json", ".pkl") and _RANK.search(p.name)]
    return sorted(set(found))
