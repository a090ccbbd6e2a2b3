"""TorchNeuron's ``graph_stats`` metric table (``TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats``):
one CSV per rank of the graphs it compiled (name, node count, compile time in microseconds), read
as a further source of compile events.

The exact column names and file names were not in the documentation available here; the reader
takes the first header it knows for each field (``GRAPH_COLUMNS`` / ``NODE_COLUMNS`` /
``COMPILE_US_COLUMNS``, case-insensitive) and the rank from a ``rank`` column or the file name
(``...rank3...csv``). Refusal: ``read_table`` never raises; a row it cannot read is counted and
kept in ``rejected`` (the first few), a file with no known graph column is refused whole.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.core.events import CompileFinished

GRAPH_COLUMNS = ("graph_name", "graph", "name")
NODE_COLUMNS = ("node_count", "num_nodes", "nodes")
COMPILE_US_COLUMNS = ("compile_time_us", "compile_us", "compilation_time_us", "compile_time")
RANK_COLUMNS = ("rank", "global_rank")
REJECTED_KEPT = 5
MAX_BYTES = 32 << 20
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class GraphStat:
    rank: int | None
    graph: str
    nodes: int | None
    compile_us: float | None


@dataclass
class GraphStatsTable:
    path: str
    rows: list[GraphStat] = field(default_factory=list)
    problems: int = 0
    rejected: list[str] = field(default_factory=list)
    refused: str | None = None  # why the whole file was not read

    def reject(self, row: str) -> None:
        self.problems += 1
        if len(self.rejected) < REJECTED_KEPT:
            self.rejected.append(row[:200])


def _column(header: list[str], names: tuple[str, ...]) -> int | None:
    lower = [h.strip().lower() for h in header]
    return next((lower.index(n) for n in names if n in lower), None)


def _number(cells: list[str], col: int | None) -> float | None:
    if col is None or col >= len(cells) or not cells[col].strip():
        return None
    v = float(cells[col])  # ValueError: the row is rejected
    if v < 0 or v != v or v in (float("inf"), float("-inf")):
        raise ValueError(cells[col])
    return v


def _row(cells: list[str], cols: dict[str, int | None], file_rank: int | None) -> GraphStat:
    name = cells[cols["graph"]].strip()
    if not name:
        raise ValueError("no graph name")
    nodes = _number(cells, cols["nodes"])
    rank = _number(cells, cols["rank"])
    return GraphStat(rank=int(rank) if rank is not None else file_rank, graph=name,
                     nodes=int(nodes) if nodes is not None else None, compile_us=_number(cells, cols["us"]))


def parse_table(text: str, path: str = "") -> GraphStatsTable:
    table = GraphStatsTable(path=path)
    rows = list(csv.reader(io.StringIO(text.replace("\0", ""))))
    header = rows[0] if rows else []
    cols = {"graph": _column(header, GRAPH_COLUMNS), "nodes": _column(header, NODE_COLUMNS),
            "us": _column(header, COMPILE_US_COLUMNS), "rank": _column(header, RANK_COLUMNS)}
    if cols["graph"] is None:
        table.refused = f"{path or 'graph_stats'}: no graph name column (one of {', '.join(GRAPH_COLUMNS)})"
        return table
    m = _RANK_IN_NAME.search(Path(path).name)
    file_rank = int(m.group(1)) if m else None
    for cells in rows[1:]:
        if not any(c.strip() for c in cells):
            continue
        try:
            table.rows.append(_row(cells, cols, file_rank))
        except (ValueError, IndexError):
            table.reject(",".join(cells))
    return table


def read_table(path: Path) -> GraphStatsTable:
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        return GraphStatsTable(path=str(path), refused=f"{path}: {exc.strerror or exc}")
    return parse_table(text, str(path))


def compile_events(table: GraphStatsTable, t: float) -> list[CompileFinished]:
    return [CompileFinished(t=t, source="graph-stats", name=r.graph, point=f"graph-stats:{r.graph}",
                            duration_s=None if r.compile_us is None else r.compile_us / 1e6,
                            reason=None if r.nodes is None else f"{r.nodes} nodes"
                                   + ("" if r.rank is None else f" (rank {r.rank})"))
            for r in table.rows]


class GraphStatsFolder:
    """Reads the CSVs of a folder as they grow: each ``poll`` returns the compile events of rows
    not seen before (per file)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._seen: dict[str, int] = {}
        self._problems: dict[str, int] = {}

    @property
    def problems(self) -> int:
        return sum(self._problems.values())

    def poll(self, t: float) -> list[CompileFinished]:
        events: list[CompileFinished] = []
        try:
            files = sorted(p for p in self.folder.glob("*.csv") if p.is_file() and not p.is_symlink())
        except OSError:
            return events
        for path in files:
            table = read_table(path)
            new = table.rows[self._seen.get(str(path), 0):]
            self._seen[str(path)] = len(table.rows)
            self._problems[str(path)] = table.problems
            events += compile_events(GraphStatsTable(path=table.path, rows=new), t)
        return events
