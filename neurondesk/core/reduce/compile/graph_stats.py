"""TorchNeuron's graph_stats rows joined to the dynamo compiles they belong to.

A record of ``get_dynamo_metrics()`` the probe read at the end of a dynamo compile names that
compile (``compile_point``, its process in ``pid``): it joins it, however many graphs it made (a
forward and its backward, two graphs of a recompiled frame). A rank writes its table at exit, so
every row arrives after the compiles it describes; a row no record named goes to one dynamo compile
of its rank that no row of that rank has taken yet: the one that ended nearest the row's timestamp
(when it has one within ``JOIN_WINDOW_S``), else the first in order. A dynamo compile's
``node_count`` is the sum of its graphs' (each graph once, whatever the ranks).
A row read twice (same file, same row) counts once, and so does a graph read from two sources:
TorchNeuron's ``get_dynamo_metrics()`` (read by the probe at the end of each dynamo compile and at
exit) and its graph_stats table are the same records, keyed by graph_id and rank; the later one
only fills in what the earlier lacked (the compile time, lazy in TorchNeuron).

A row no dynamo compile takes (no probe saw torch.compile, a folder of the user's own, more
graphs than dynamo compiles) becomes a compile of its own (source ``graph_stats``, cause
``neuron-compile``: its graph name and id, node count and split), listed in every output. It is
counted in the totals (compile count and seconds) only when no compile already recorded may hold
its time: a dynamo compile runs the Neuron backend inside it (a dynamo compile that made two
graphs holds the second row's seconds), the compiler's log line (neuron-log) or the probe may have
recorded the same compile. "May hold": a counted compile of its rank whose span (widened by the
row's own duration and HOLD_SLACK_S) contains the row's timestamp; for a row with no timestamp,
any counted compile of its rank. Such a row is listed with ``counted`` false and says which
compile holds it. The same graph (graph_id) on several ranks is one row with its ranks, its time
counted once (the ranks compile in parallel), as for the other sources."""

from __future__ import annotations

from dataclasses import dataclass, replace

from neurondesk.core.events import device_events as dev
from neurondesk.core.reduce.compile.compiles import CompileRecord, CompileReducer

JOIN_WINDOW_S = 3600.0
UNJOINED_KEEP = 200
OWN_KEEP = 5000  # graph_stats rows made compiles of their own; past that, only counted (graph_stats_unjoined)
OWN_CAUSE = "neuron-compile"  # a Neuron compile no dynamo compile took (docs/compile-causes.md)
HOLD_SLACK_S = 5.0  # two clocks (TorchNeuron's timestamp, the recorder's), an undocumented timestamp meaning


@dataclass(frozen=True)
class CompileSplit:
    """Where one rank's compile of one graph went, as TorchNeuron measured it (seconds)."""

    rank: int | None
    graph_id: str | None
    graph_name: str | None
    node_count: int | None
    has_collectives: bool | None
    fx_passes_s: float | None
    lower_s: float | None
    compile_s: float | None

    @property
    def total_s(self) -> float | None:
        parts = [x for x in (self.fx_passes_s, self.lower_s, self.compile_s) if x is not None]
        return sum(parts) if parts else None

    def words(self) -> str:
        """"forward_graph_0: FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s (graph 3f2a…,
        1,834 nodes, collectives, rank 1)": the console's wording (summary.md's times are ``split_times_words``)."""
        facts = [f"graph {self.graph_id}" if self.graph_id else None,
                 f"{self.node_count:,} nodes" if self.node_count is not None else None,
                 "collectives" if self.has_collectives else None,
                 f"rank {self.rank}" if self.rank is not None else None]
        facts_text = ", ".join(f for f in facts if f)
        return (f"{self.graph_name}: " if self.graph_name else "") + split_times_words(
            self.fx_passes_s, self.lower_s, self.compile_s) + (f" ({facts_text})" if facts_text else "")


def split_times_words(fx_passes_s: float | None, lower_s: float | None, compile_s: float | None) -> str:
    """"FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s" (the parts known), or "no times"."""
    parts = [f"{label} {v:.2f} s" for label, v in (("FX passes", fx_passes_s), ("lowering", lower_s),
                                                   ("Neuron compile", compile_s)) if v is not None]
    return " · ".join(parts or ["no times"])


def _own_reason(split: CompileSplit, holder: CompileRecord | None) -> str:
    """What a graph_stats compile of its own is, and why it is (not) in the totals."""
    nodes = f", {split.node_count:,} nodes" if split.node_count is not None else ""
    head = (f"TorchNeuron graph_stats row that joined no dynamo compile: "
            f"{split_times_words(split.fx_passes_s, split.lower_s, split.compile_s)}{nodes}")
    if holder is None:
        return head + "; counted in the compile totals"
    return (f"{head}; not in the compile totals: compile #{holder.index} ({holder.source}) may already hold "
            "its time")


def _split(e: dev.NeuronGraphStat) -> CompileSplit:
    return CompileSplit(rank=e.rank, graph_id=e.graph_id, graph_name=e.graph_name, node_count=e.node_count,
                        has_collectives=e.has_collectives, fx_passes_s=e.fx_passes_s, lower_s=e.lower_s,
                        compile_s=e.compile_s)


def _rank_matches(c: CompileRecord, rank: int | None) -> bool:
    if rank is None:
        return True
    return rank in c.ranks or (not c.ranks and rank == 0)


class GraphStatsJoin:
    def __init__(self, compiles: CompileReducer) -> None:
        self._compiles = compiles
        self.by_compile: dict[int, list[CompileSplit]] = {}  # CompileRecord.index -> one split per rank
        self.unjoined: list[CompileSplit] = []  # the first UNJOINED_KEEP rows no dynamo compile took
        self.unjoined_rows = 0  # all of them
        self._own: dict[str, CompileRecord] = {}  # graph id (else name) -> its compile of its own
        self._seen: set[tuple[str, int]] = set()
        self._graphs: dict[tuple[int, str], int] = {}  # (rank, graph_id) -> the compile index its split is under

    @property
    def rows(self) -> int:
        """graph_stats rows read (each once)."""
        return len(self._seen)

    def on_row(self, e: dev.NeuronGraphStat) -> None:
        key = (e.path, e.row)
        if key in self._seen:
            return
        self._seen.add(key)
        graph = (e.rank or 0, e.graph_id) if e.graph_id else None
        if graph is not None and graph in self._graphs:  # the same graph from the other source
            self._fill(self._graphs[graph], _split(e))
            return
        record = self._named_compile(e) or self._compile_for(e)
        if record is None:
            self.unjoined_rows += 1
            if len(self.unjoined) < UNJOINED_KEEP:
                self.unjoined.append(_split(e))
            if self.unjoined_rows <= OWN_KEEP:
                self._own_compile(e, _split(e))
                if graph is not None:
                    self._graphs[graph] = self._own[e.graph_id].index
            return
        self.by_compile.setdefault(record.index, []).append(_split(e))
        if graph is not None:
            self._graphs[graph] = record.index
        self._count_nodes(record)

    def _named_compile(self, e: dev.NeuronGraphStat) -> CompileRecord | None:
        """The dynamo compile at whose end the probe read this record: the latest of its process at that point."""
        if e.compile_point is None:
            return None
        rank = self._compiles.rank_of(e.pid)
        for c in reversed(self._compiles.compiles):
            if (c.source == "dynamo" and c.point_key == e.compile_point
                    and (c.pid == e.pid or e.pid is None or (rank is not None and rank in c.ranks))):
                return c
        return None

    def _count_nodes(self, record: CompileRecord) -> None:
        """A dynamo compile's node count: its graphs' (each graph once, whatever the ranks)."""
        if record.source != "dynamo":
            return
        graphs = {s.graph_id or s.graph_name: s.node_count for s in self.by_compile.get(record.index, [])}
        counts = [n for n in graphs.values() if n is not None]
        record.node_count = sum(counts) if counts else None

    def graphs_of(self, index: int) -> list[CompileSplit]:
        """The TorchNeuron graphs a compile made, each once (the first rank's split of it)."""
        seen: dict[str | None, CompileSplit] = {}
        for s in self.by_compile.get(index, []):
            seen.setdefault(s.graph_id or s.graph_name, s)
        return list(seen.values())

    def _fill(self, index: int, new: CompileSplit) -> None:
        """What the earlier record of a graph lacked (None or 0), from the later one."""
        splits = self.by_compile.get(index, [])
        for i, old in enumerate(splits):
            if old.graph_id == new.graph_id and (old.rank or 0) == (new.rank or 0):
                merged = {name: getattr(new, name) for name in CompileSplit.__dataclass_fields__
                          if not getattr(old, name) and getattr(new, name) is not None}
                splits[i] = replace(old, **merged)
                if "node_count" in merged:
                    self._count_nodes(next(c for c in self._compiles.compiles if c.index == index))
                own = next((c for c in self._own.values() if c.index == index), None)
                if own is not None:
                    own.duration_s = splits[i].total_s
                return

    def _own_compile(self, e: dev.NeuronGraphStat, split: CompileSplit) -> None:
        total = split.total_s
        key = e.graph_id or e.graph_name or ""
        same = self._own.get(key)
        if same is not None and e.rank is not None and e.rank not in same.ranks:  # another rank, the same graph
            same.ranks.append(e.rank)
            if total is not None:
                same.rank_durations.append(total)
            self.by_compile[same.index].append(split)
            return
        holder = self._holder(e, total)
        record = self._compiles.add_own(CompileRecord(
            index=0, t=e.timestamp if e.timestamp is not None else e.t, step=None, source="graph_stats",
            cause=OWN_CAUSE, duration_s=total, location=None, graph_hash=e.graph_id, cache=None, trigger=None,
            input_shapes=None, previous_shapes=None, reason=_own_reason(split, holder), frames=[], ok=True,
            error=None, name=e.graph_name, node_count=e.node_count, counted=holder is None,
            ranks=[e.rank] if e.rank is not None else [], rank_durations=[total] if total is not None else []))
        self._own[key] = record
        self.by_compile[record.index] = [split]

    def _holder(self, e: dev.NeuronGraphStat, total: float | None) -> CompileRecord | None:
        """A compile already counted that may hold this row's time (the module's docstring), or None."""
        mine = [c for c in self._compiles.compiles if c.source != "graph_stats" and c.counted
                and (e.rank is None or not c.ranks or e.rank in c.ranks)]
        if e.timestamp is None:  # not placed in time: any compile of its rank may hold it
            return mine[0] if mine else None
        reach = (total or 0.0) + HOLD_SLACK_S
        return next((c for c in mine if c.t - (c.duration_s or 0.0) - reach <= e.timestamp <= c.t + reach), None)

    def _compile_for(self, e: dev.NeuronGraphStat) -> CompileRecord | None:
        taken = {i for i, splits in self.by_compile.items() if any(s.rank == e.rank for s in splits)}
        free = [c for c in self._compiles.compiles
                if c.source == "dynamo" and c.index not in taken and _rank_matches(c, e.rank)]
        if not free:
            return None
        if e.timestamp is not None:
            nearest = min(free, key=lambda c: abs(c.t - e.timestamp))
            if abs(nearest.t - e.timestamp) <= JOIN_WINDOW_S:
                return nearest
        return free[0]

    def splits_for(self, index: int) -> list[CompileSplit]:
        return self.by_compile.get(index, [])
