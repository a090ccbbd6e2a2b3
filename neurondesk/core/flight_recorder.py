"""PyTorch's Flight Recorder, read as "which collective is this node blocked in, and which rank never
reached it" (issue 33 item 8). Pure: a dump's dict in, words out (collectors/flight_recorder.py reads
the files).

A dump (``torch._C._distributed_c10d._dump_fr_trace_json()``, or the pickle torch's NCCL watchdog
writes on a timeout to ``TORCH_FR_DUMP_TEMP_FILE<rank>``; version "2.10" in torch 2.9) has
``entries`` (one per collective: ``collective_seq_id``, ``pg_id``, ``process_group`` [id, name],
``profiling_name`` such as "gloo:all_reduce", ``input_sizes``, ``input_dtypes``, ``retired``,
``time_created_ns``) and ``pg_status`` (per process group id: ``last_enqueued_collective``,
``last_completed_collective``, as text). A group is blocked where its rank enqueued a collective it
has not completed; a rank of the same group whose last enqueued is before it never reached it.
On gloo (torch 2.9) the entries are recorded (``TORCH_FR_BUFFER_SIZE``) but their ``state`` stays
"scheduled": only ``pg_status`` and ``retired`` tell progress, and no dump is written on a timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Collective:
    seq: int
    op: str  # "gloo:all_reduce", "nccl:all_reduce"
    shapes: str  # "Float [4]"
    created_ns: int | None = None


@dataclass(frozen=True)
class GroupProgress:
    pg: str  # process group id, as the dump keys it
    name: str  # "default_pg"
    enqueued: int | None
    completed: int | None
    blocked: Collective | None = None  # the first collective enqueued and not completed


@dataclass(frozen=True)
class RankRecord:
    rank: int
    groups: list[GroupProgress] = field(default_factory=list)
    entries: int = 0  # 0: the recorder was off (TORCH_FR_BUFFER_SIZE unset) or nothing ran


def _int(v: Any) -> int | None:
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def _shapes(e: Mapping) -> str:
    dtypes, sizes = e.get("input_dtypes") or [], e.get("input_sizes") or []
    parts = [f"{d} {list(s) if isinstance(s, list | tuple) else s}" for d, s in zip(dtypes, sizes, strict=False)]
    return ", ".join(parts[:3]) + (" ..." if len(parts) > 3 else "")


def _collective(e: Mapping) -> Collective:
    return Collective(seq=_int(e.get("collective_seq_id")) or 0, op=str(e.get("profiling_name") or "?"),
                      shapes=_shapes(e), created_ns=_int(e.get("time_created_ns")))


def read_record(rank: int, dump: Mapping) -> RankRecord:
    """One rank's dump as its groups' progress; keys it lacks are left unknown, never raised on."""
    entries = [e for e in dump.get("entries") or [] if isinstance(e, Mapping) and not e.get("is_p2p")]
    names: dict[str, str] = {}
    for e in entries:
        pg = e.get("process_group")
        if isinstance(pg, list | tuple) and len(pg) == 2:
            names[str(pg[0])] = str(pg[1])
    groups = []
    status = dump.get("pg_status") if isinstance(dump.get("pg_status"), Mapping) else {}
    for pg, s in sorted(status.items()):
        s = s if isinstance(s, Mapping) else {}
        enq, done = _int(s.get("last_enqueued_collective")), _int(s.get("last_completed_collective"))
        blocked = None
        if enq is not None and (done is None or enq > done):
            mine = [e for e in entries if str(e.get("pg_id")) == str(pg)]
            want = [e for e in mine if _int(e.get("collective_seq_id")) == (done or 0) + 1]
            pending = want or [e for e in mine if not e.get("retired")]
            blocked = _collective(pending[0]) if pending else Collective(seq=(done or 0) + 1, op="?", shapes="")
        groups.append(GroupProgress(pg=str(pg), name=names.get(str(pg), str(pg)), enqueued=enq, completed=done,
                                    blocked=blocked))
    return RankRecord(rank=rank, groups=groups, entries=len(entries))


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def hang_words(node: str, records: list[RankRecord]) -> str | None:
    """"trn-07: rank 0 blocked in collective #4 gloo:all_reduce (Float [4]) of default_pg; rank 1 never
    reached it (its last: #3)"; None when no rank of the node is blocked in a collective."""
    said = []
    for pg in sorted({g.pg for r in records for g in r.groups}):
        group = {r.rank: g for r in records for g in r.groups if g.pg == pg}
        blocked = {rank: g for rank, g in group.items() if g.blocked is not None}
        if not blocked:
            continue
        first = min(g.blocked.seq for g in blocked.values())
        at = sorted(rank for rank, g in blocked.items() if g.blocked.seq == first)
        c = blocked[at[0]].blocked
        line = f"{_ranks(at)} blocked in collective #{c.seq} {c.op}" + (f" ({c.shapes})" if c.shapes else "")
        line += f" of {blocked[at[0]].name}"
        behind = sorted(rank for rank, g in group.items() if g.enqueued is not None and g.enqueued < first)
        if behind:
            lasts = sorted({group[rank].enqueued for rank in behind})
            line += f"; {_ranks(behind)} never reached it (last: {', '.join(f'#{n}' for n in lasts)})"
        said.append(line)
    off = sorted(r.rank for r in records if r.entries == 0)
    if off and said:
        said.append(f"{_ranks(off)} recorded nothing (TORCH_FR_BUFFER_SIZE unset?)")
    return f"{node}: " + "; ".join(said) if said else None
