"""TorchNeuron's graph_stats rows joined to the dynamo compiles they belong to.

A rank writes its table at exit, so every row arrives after the compiles it describes. Each row
goes to one dynamo compile of its rank that no row of that rank has taken yet: the one that ended
nearest the row's timestamp (when it has one within ``JOIN_WINDOW_S``), else the first in order.
A row read twice (same file, same row) counts once; a row with no compile to join is kept apart
(``unjoined``), never made a compile of its own (the probe already counted the compile)."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core import device_events as dev
from neurondesk.core.reduce.compiles import CompileRecord, CompileReducer

JOIN_WINDOW_S = 3600.0
UNJOINED_KEEP = 200


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
        """"FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s (graph 3f2a…, 1,834 nodes,
        collectives, rank 1)": the console's wording (summary.md's times are ``split_times_words``)."""
        facts = [f"graph {self.graph_id}" if self.graph_id else None,
                 f"{self.node_count:,} nodes" if self.node_count is not None else None,
                 "collectives" if self.has_collectives else None,
                 f"rank {self.rank}" if self.rank is not None else None]
        facts_text = ", ".join(f for f in facts if f)
        return split_times_words(self.fx_passes_s, self.lower_s, self.compile_s) + (
            f" ({facts_text})" if facts_text else "")


def split_times_words(fx_passes_s: float | None, lower_s: float | None, compile_s: float | None) -> str:
    """"FX passes 1.20 s · lowering 0.80 s · Neuron compile 41.30 s" (the parts known), or "no times"."""
    parts = [f"{label} {v:.2f} s" for label, v in (("FX passes", fx_passes_s), ("lowering", lower_s),
                                                   ("Neuron compile", compile_s)) if v is not None]
    return " · ".join(parts or ["no times"])


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
        self.unjoined: list[CompileSplit] = []
        self._seen: set[tuple[str, int]] = set()

    @property
    def rows(self) -> int:
        """graph_stats rows read (each once)."""
        return len(self._seen)

    def on_row(self, e: dev.NeuronGraphStat) -> None:
        key = (e.path, e.row)
        if key in self._seen:
            return
        self._seen.add(key)
        record = self._compile_for(e)
        if record is None:
            if len(self.unjoined) < UNJOINED_KEEP:
                self.unjoined.append(_split(e))
            return
        self.by_compile.setdefault(record.index, []).append(_split(e))

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
