"""PyTorch's Flight Recorder, read as "which collective is this node blocked in, and which rank never
reached it" (issue 33 item 8). Pure: a dump's dict in, words out (collectors/flight_recorder.py reads
the files).

A dump (``torch._C._distributed_c10d._dump_fr_trace_json()``, or the pickle torch's NCCL watchdog
writes on a timeout to ``TORCH_FR_DUMP_TEMP_FILE<rank>``; version "2.10" in torch 2.9) has
``entries`` (one per collective: ``collective_seq_id``, ``pg_id``, ``process_group`` [id, name],
``profiling_name`` such as "gloo:all_reduce", ``input_sizes``, ``input_dtypes``, ``retired``,
``time_created_ns``, ``state``) and ``pg_status`` (per process group id: ``last_enqueued_collective``,
``last_completed_collective``, as text). A group is blocked where its rank enqueued a collective it
has not completed; a rank of the same group whose last enqueued is before it never reached it.
On gloo (torch 2.9) the entries are recorded (``TORCH_FR_BUFFER_SIZE``) but their ``state`` stays
"scheduled": only ``pg_status`` and ``retired`` tell progress, and no dump is written on a timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neurondesk.core.events.run_events import CollectiveBlocked


@dataclass(frozen=True)
class Collective:
    seq: int
    op: str  # "gloo:all_reduce", "nccl:all_reduce"
    shapes: str  # "Float [4]"
    created_ns: int | None = None
    state: str = ""  # the entry's "scheduled" | "started" | "completed" (gloo: "scheduled" throughout)


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


# The variables that turn the recorder on and say where torch dumps it (torch 2.7 renamed TORCH_NCCL_*
# to TORCH_FR_*; both are read). The probe sends those its process has in its hello (the same list).
BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DUMP_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
ENV_VARS = (*BUFFER_VARS, *DUMP_VARS, "TORCH_NCCL_DUMP_ON_TIMEOUT")
ENABLE_HINT = ("PyTorch's Flight Recorder is off in this run's ranks: with TORCH_FR_BUFFER_SIZE=2000 in the job's "
               "environment (TORCH_NCCL_TRACE_BUFFER_SIZE before torch 2.7) `neurondesk stacks` names the collective "
               "each rank is blocked in and the rank that never entered it (docs/ranks.md)")


def enabled(env: Mapping[str, str]) -> bool:
    """The recorder is on in a process with this environment (a buffer of at least one entry)."""
    return any((_int(env.get(v)) or 0) > 0 for v in BUFFER_VARS)


def dump_prefix(env: Mapping[str, str]) -> str | None:
    """Where torch's watchdog writes a rank's dump (the prefix; the rank number follows), if set."""
    return next((env[v] for v in DUMP_VARS if env.get(v)), None)


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
                      shapes=_shapes(e), created_ns=_int(e.get("time_created_ns")), state=str(e.get("state") or ""))


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


def _ranks(ranks: list[int] | tuple[int, ...]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


@dataclass(frozen=True)
class BlockedCollective:
    """The collective a process group of this node is blocked in: the earliest one some of its
    ranks entered and did not complete, and the ranks of the group that never entered it."""

    op: str  # "gloo:all_reduce"
    seq: int  # the group's collective sequence number
    group: str  # the process group's name ("default_pg")
    state: str  # the blocked ranks' entry state ("scheduled", "started"; "" unknown)
    shapes: str  # "Float [4]"
    ranks: tuple[int, ...]  # the node's ranks blocked in it
    never_entered: tuple[int, ...]  # the node's ranks of the group whose last collective is before it
    last: tuple[int, ...] = ()  # the last collective each of those entered, in the same order

    def words(self) -> str:
        line = f"{_ranks(self.ranks)} blocked in collective #{self.seq} {self.op}"
        line += (f" ({self.shapes})" if self.shapes else "") + f" of {self.group}"
        if self.never_entered:
            lasts = sorted(set(self.last))
            line += f"; {_ranks(self.never_entered)} never reached it (last: {', '.join(f'#{n}' for n in lasts)})"
        return line


def blocked_collectives(records: list[RankRecord]) -> list[BlockedCollective]:
    """Per process group with a blocked rank: its blocked collective, in the order of the groups' ids."""
    out = []
    for pg in sorted({g.pg for r in records for g in r.groups}):
        group = {r.rank: g for r in records for g in r.groups if g.pg == pg}
        blocked = {rank: g for rank, g in group.items() if g.blocked is not None}
        if not blocked:
            continue
        first = min(g.blocked.seq for g in blocked.values())
        at = sorted(rank for rank, g in blocked.items() if g.blocked.seq == first)
        c = blocked[at[0]].blocked
        behind = sorted(rank for rank, g in group.items() if g.enqueued is not None and g.enqueued < first)
        out.append(BlockedCollective(op=c.op, seq=c.seq, group=blocked[at[0]].name, state=c.state, shapes=c.shapes,
                                     ranks=tuple(at), never_entered=tuple(behind),
                                     last=tuple(group[rank].enqueued or 0 for rank in behind)))
    return out


def hang_words(node: str, records: list[RankRecord]) -> str | None:
    """"trn-07: rank 0 blocked in collective #4 gloo:all_reduce (Float [4]) of default_pg; rank 1 never
    reached it (last: #3)"; None when no rank of the node is blocked in a collective."""
    said = [b.words() for b in blocked_collectives(records)]
    off = sorted(r.rank for r in records if r.entries == 0)
    if off and said:
        said.append(f"{_ranks(off)} recorded nothing (TORCH_FR_BUFFER_SIZE unset?)")
    return f"{node}: " + "; ".join(said) if said else None


def rank_lines(records: list[RankRecord]) -> list[str]:
    """One line per rank and process group: the collective it is blocked in (op, sequence number,
    group, state), or the one it never entered, or that it is idle."""
    stuck = {b.group: b for b in blocked_collectives(records)}
    out = []
    for r in sorted(records, key=lambda r: r.rank):
        if r.entries == 0:
            out.append(f"rank {r.rank}: recorded no collective (TORCH_FR_BUFFER_SIZE unset in it?)")
        for g in r.groups:
            b, done = stuck.get(g.name), "none" if g.completed is None else f"#{g.completed}"
            if g.blocked is not None:
                c = g.blocked
                state = f"state {c.state}, " if c.state else ""
                shapes = f" ({c.shapes})" if c.shapes else ""
                out.append(f"rank {r.rank}: blocked in {c.op} #{c.seq}{shapes} of {g.name} ({state}entered "
                           f"#{g.enqueued}, completed {done})")
            elif b is not None and r.rank in b.never_entered:
                out.append(f"rank {r.rank}: never entered {b.op} #{b.seq} of {g.name} (its last: #{g.enqueued}, "
                           f"completed {done})")
            elif b is not None:
                out.append(f"rank {r.rank}: not blocked in {g.name} (its last: #{g.enqueued}, completed {done})")
    return out


def blocked_event(t: float, found: list[BlockedCollective], words: str) -> CollectiveBlocked:
    """The first group's blocked collective as the recorder journals it (``words``: every group's)."""
    b = found[0]
    return CollectiveBlocked(t=t, op=b.op, seq=b.seq, group=b.group, state=b.state, shapes=b.shapes,
                             ranks=list(b.ranks), never_entered=list(b.never_entered), last=list(b.last), words=words)


@dataclass(frozen=True)
class FlightView:
    """What these rules read of a run (core/reduce/state.py's ``RunState.flight()``), never the reducers."""

    blocked: CollectiveBlocked | None  # the latest read of the ranks' dumps
    finished: bool
    last_step_end: float | None
    env: tuple[tuple[str, str], ...]  # the ranks' Flight Recorder variables, as the first probe said them


def blocked_now(view: FlightView) -> BlockedCollective | None:
    """The collective the run's ranks are blocked in, as last read from their dumps; None once a step
    ended after that read, or the run finished."""
    e = view.blocked
    if e is None or view.finished:
        return None
    last = view.last_step_end
    if last is not None and last > e.t:
        return None
    return BlockedCollective(op=e.op, seq=e.seq, group=e.group, state=e.state, shapes=e.shapes, ranks=tuple(e.ranks),
                             never_entered=tuple(e.never_entered), last=tuple(e.last))


def flight_env(view: FlightView) -> dict[str, str]:
    """The Flight Recorder variables of the run's ranks, as their probes said them in their hellos
    (the first process that had any)."""
    return dict(view.env)
