"""One compile as the reducer keeps it (what summary.json's "compiles" rows are made of)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass
class CompileRecord:
    index: int  # 1-based, in arrival order
    t: float
    step: int | None
    source: str
    cause: str
    duration_s: float | None
    location: str | None
    graph_hash: str | None
    cache: str | None
    trigger: str | None
    input_shapes: list[list[int]] | None
    previous_shapes: list[list[int]] | None
    reason: str | None
    frames: list[str]
    ok: bool
    error: str | None
    name: str | None = None
    phase: str = "train"  # "train" | "eval": recompiles are counted per phase
    recompile: bool = False  # a compile of a point (graph slot, name, dynamo frame) compiled before in its phase
    eval_phases_before: int = 0  # evaluation phases completed when it compiled (the first one is warm-up)
    graph_inputs: int | None = None
    point_key: str | None = None  # the sync point (or location, hash, name) it was compiled at
    library: str | None = None  # the framework's frame inside the user's line (Trainer, Lightning ...)
    pid: int | None = None
    ranks: list[int] = dataclasses.field(default_factory=list)  # every rank that compiled this graph
    rank_durations: list[float] = dataclasses.field(default_factory=list)
    hit_ranks: list[int] = dataclasses.field(default_factory=list)  # ranks the persistent cache served
    node_count: int | None = None  # the graph's FX node count (a graph_stats compile: TorchNeuron's table)
    # False: listed, but its time is not in the totals (count, seconds): a graph_stats row whose time
    # another compile already holds (core/reduce/compile/graph_stats.py says when)
    counted: bool = True
    graph_break: str | None = None  # the frame it compiled broke there: what, where, why (compile_causes.break_words)
    count: int = 1  # compiles this record stands for: a group of TorchNeuron's eager NEFFs holds many (core/reduce/compile/neff.py)

    def snapshot(self) -> CompileRecord:
        """A copy sharing nothing mutable with this record: a frame's view holds these, and the reducer
        goes on changing its own (a late cause, another rank's duration, the cache's verdict)."""
        return dataclasses.replace(self, input_shapes=_shapes(self.input_shapes),
                                   previous_shapes=_shapes(self.previous_shapes), frames=list(self.frames),
                                   ranks=list(self.ranks), rank_durations=list(self.rank_durations),
                                   hit_ranks=list(self.hit_ranks))

    @property
    def status(self) -> str:
        """ok / failed / cached failure (a failure the persistent cache kept from an earlier run)."""
        if self.cache == "failed":
            return "cached failure"
        return "ok" if self.ok else "failed"

    def as_dict(self) -> dict:
        return {
            "step": self.step,
            "cause": self.cause,
            "location": self.location,
            "library": self.library,
            "graph_hash": self.graph_hash,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 6),
            "cache": self.cache,
            "source": self.source,
            "trigger": self.trigger,
            "input_shapes": self.input_shapes,
            "previous_shapes": self.previous_shapes,
            "reason": self.reason,
            "frames": self.frames,
            "ok": self.ok,
            "status": self.status,
            "error": self.error,
            "name": self.name,
            "phase": self.phase,
            "recompile": self.recompile,
            "graph_inputs": self.graph_inputs,
            "ranks": self.ranks,
            "duration_spread_s": ([round(min(self.rank_durations), 6), round(max(self.rank_durations), 6)]
                                  if len(self.rank_durations) > 1 else None),
            "cache_hit_ranks": self.hit_ranks,
            "node_count": self.node_count,
            "counted": self.counted,
            "count": self.count,
            "graph_break": self.graph_break,
        }


def _shapes(shapes: list[list[int]] | None) -> list[list[int]] | None:
    return None if shapes is None else [list(s) for s in shapes]
