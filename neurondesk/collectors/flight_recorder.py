"""PyTorch Flight Recorder dump files of one node, read for core/node/flight_recorder.py.

Where they come from: torch's NCCL watchdog writes one per rank on a collective timeout when
``TORCH_FR_BUFFER_SIZE`` (older: ``TORCH_NCCL_TRACE_BUFFER_SIZE``) is set and
``TORCH_NCCL_DUMP_ON_TIMEOUT`` is on, to ``TORCH_FR_DUMP_TEMP_FILE<rank>`` (default
``/tmp/nccl_trace_rank_<rank>``), as a pickle; a program can write its own as JSON with
``torch._C._distributed_c10d._dump_fr_trace_json()``. Under gloo (torch 2.9, checked here with a
real torchrun hang) the recorder records every collective but writes nothing on a timeout: only
the program's own dump exists. A pickle is read with no class allowed (the dump is plain dicts,
lists, strings and numbers), so reading one runs no code. The rank is the file name's last number.

On request: where a rank's probe runs with the recorder on, it serves a FIFO ``fr-<pid>.fifo`` in the
run's private folder (probe/.../flight.py); ``request_dumps`` writes a byte into each and reads the
``fr-<pid>.json`` each answers with (torch's JSON dump, taken by the probe's own thread), so a gloo
hang has its dumps too. ``node_dumps`` adds the watchdog's files of the ranks that did not answer.

Refusal: a file that is a link, too big, or neither JSON nor a plain pickle is skipped with the
reason in ``problems``; nothing raises.
"""

from __future__ import annotations

import errno
import io
import json
import os
import pickle
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.core.node.flight_recorder import RankRecord, dump_prefix, hang_words, read_record

MAX_BYTES = 64 << 20
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
REQUEST_TIMEOUT_S = 3.0
POLL_S = 0.05
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
    """The dump files the run's environment points at (``TORCH_FR_DUMP_TEMP_FILE`` or
    ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, else torch's
    default prefix), and those in ``folder`` (a program's own JSON dumps)."""
    prefix = Path(dump_prefix(env) or DEFAULT_PREFIX)
    found = [p for p in prefix.parent.glob(prefix.name + "*") if _RANK.search(p.name)] if prefix.parent.is_dir() else []
    if folder is not None and folder.is_dir():
        found += [p for p in folder.iterdir() if p.suffix in (".json", ".pkl") and _RANK.search(p.name)]
    return sorted(set(found))


def answers(private_dir: str) -> bool:
    """Some process of the run serves its dump on request (a FIFO in its private folder)."""
    try:
        return any(n.startswith("fr-") and n.endswith(".fifo") for n in os.listdir(private_dir))
    except OSError:
        return False


def _ask(fifo: str) -> str | None:
    """Write one byte into a probe's FIFO; why not, or None. No reader (ENXIO): the process is gone,
    or its thread is between two requests (tried again once)."""
    for attempt in range(2):
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as e:
            if e.errno == errno.ENXIO and attempt == 0:
                time.sleep(POLL_S)
                continue
            return "no dump served (the process has ended?)" if e.errno == errno.ENXIO else str(e.strerror or e)
        try:
            os.write(fd, b"1")
        finally:
            os.close(fd)
        return None
    return "no dump served"


def request_dumps(targets: dict[int, int], private_dir: str, timeout: float = REQUEST_TIMEOUT_S) -> NodeDumps:
    """Each rank's dump (``targets``: pid -> global rank), asked of its probe through its FIFO; a
    process with no FIFO (the recorder off in it, no probe) is left out; one that does not answer
    within ``timeout`` seconds is a problem."""
    out, asked = NodeDumps(), {}
    for pid, rank in sorted(targets.items(), key=lambda pr: pr[1]):
        fifo, dump = Path(private_dir) / f"fr-{pid}.fifo", Path(private_dir) / f"fr-{pid}.json"
        try:
            if not stat.S_ISFIFO(os.stat(fifo, follow_symlinks=False).st_mode):
                continue
        except OSError:
            continue
        try:
            dump.unlink()  # the answer is the file that appears after the request
        except OSError:
            pass
        why = _ask(str(fifo))
        if why is not None:
            out.problems.append(f"rank {rank} (pid {pid}): {why}")
            continue
        asked[pid] = (rank, dump)
    deadline = time.monotonic() + timeout
    while asked:
        for pid, (rank, dump) in list(asked.items()):
            if dump.exists():
                del asked[pid]
                try:
                    out.records.append(read_record(rank, _load(dump)))
                except (OSError, ValueError, pickle.UnpicklingError, EOFError) as e:
                    out.problems.append(f"{dump}: {e}")
        if not asked or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    out.problems += [f"rank {rank} (pid {pid}): no dump within {timeout:.0f} s" for pid, (rank, _) in asked.items()]
    out.records.sort(key=lambda r: r.rank)
    return out


def node_dumps(targets: dict[int, int], private_dir: str | None, env: dict[str, str],
               since: float | None = None) -> NodeDumps:
    """The ranks' dumps on request, and, for the ranks that gave none, the files torch's watchdog
    wrote where ``env`` points (only those written after ``since``, the run's start: older ones are
    another run's)."""
    got = request_dumps(targets, private_dir) if private_dir else NodeDumps()
    have = {r.rank for r in got.records}
    fresh = []
    for p in dump_paths(env):
        try:
            if since is None or p.stat(follow_symlinks=False).st_mtime >= since:
                fresh.append(p)
        except OSError:
            continue
    files = read_dumps(fresh)
    wanted = set(targets.values())
    got.records += [r for r in files.records if r.rank not in have and (not wanted or r.rank in wanted)]
    got.problems += files.problems
    got.records.sort(key=lambda r: r.rank)
    return got
