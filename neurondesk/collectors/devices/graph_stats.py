"""TorchNeuron's ``graph_stats`` metric table: with ``TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats``
and ``TORCH_NEURONX_METRICS_DIR=DIR``, each rank writes ``DIR/metric_table_graph_stats_rank{N}.csv``
at exit, one row per graph it compiled, with the columns ``graph_id`` (the cache key),
``graph_name``, ``model_name``, ``has_collectives``, ``graph_node_count``, ``timestamp``,
``torch_neuronx_fx_passes_us``, ``torch_neuronx_lower_us`` and ``torch_neuronx_compile_us``
(issue 27, from the TorchNeuron metrics documentation of Neuron 2.33–2.34; the timestamp's unit is
not given there: epoch seconds, milliseconds, microseconds or ISO 8601 are read).

Each row becomes a ``NeuronGraphStat`` event; the reducer joins it to the dynamo compile it belongs
to. Refusal: ``read_table`` never raises; a row it cannot read is counted and kept in ``rejected``
(the first few), a file with no graph column is refused whole.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from neurondesk.core.events.device_events import NeuronGraphStat
from neurondesk.store.input_files import open_regular_stream
from neurondesk.store.rundir import RunPaths

ENABLE_VAR = "TORCH_NEURONX_ENABLED_METRIC_TABLES"
DIR_VAR = "TORCH_NEURONX_METRICS_DIR"

# documented names first; the names this reader guessed before the documentation are kept
COLUMNS: dict[str, tuple[str, ...]] = {
    "graph_id": ("graph_id",),
    "graph_name": ("graph_name", "graph", "name"),
    "model_name": ("model_name",),
    "has_collectives": ("has_collectives",),
    "nodes": ("graph_node_count", "node_count", "num_nodes"),
    "timestamp": ("timestamp",),
    "fx_us": ("torch_neuronx_fx_passes_us",),
    "lower_us": ("torch_neuronx_lower_us",),
    "compile_us": ("torch_neuronx_compile_us", "compile_time_us", "compile_us"),
    "rank": ("rank", "global_rank"),
}
REJECTED_KEPT = 5
MAX_BYTES = 32 << 20
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d{1,6})", re.IGNORECASE)


@dataclass
class GraphStatsTable:
    path: str
    rows: list[NeuronGraphStat] = field(default_factory=list)
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


def _cell(cells: list[str], col: int | None) -> str:
    return cells[col].strip() if col is not None and col < len(cells) else ""


def _number(text: str) -> float | None:
    if not text:
        return None
    v = float(text)  # ValueError: the row is rejected
    if v < 0 or v != v or v in (float("inf"), float("-inf")) or v > 1e18:
        raise ValueError(text)
    return v


def _seconds(text: str) -> float | None:
    us = _number(text)
    return None if us is None else us / 1e6


def parse_timestamp(text: str) -> float | None:
    """Epoch seconds from epoch s / ms / us / ns (told apart by size) or ISO 8601; None when empty
    or not a time (the row is kept, only not placed in time)."""
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if not v > 0 or v != v or v == float("inf"):
        return None
    for scale in (1.0, 1e3, 1e6, 1e9):
        if v / scale < 1e10:  # before the year 2286
            return v / scale
    return None


def _flag(text: str) -> bool | None:
    t = text.lower()
    return True if t in ("1", "true", "yes", "y", "t") else False if t in ("0", "false", "no", "n", "f") else None


def _row(cells: list[str], cols: dict[str, int | None], file_rank: int | None, path: str, row: int,
         t: float) -> NeuronGraphStat:
    name, graph_id = _cell(cells, cols["graph_name"]), _cell(cells, cols["graph_id"])
    if not name and not graph_id:
        raise ValueError("no graph name or id")
    nodes, rank = _number(_cell(cells, cols["nodes"])), _number(_cell(cells, cols["rank"]))
    return NeuronGraphStat(
        t=t, path=path, row=row, rank=int(rank) if rank is not None else file_rank,
        graph_id=graph_id[:200] or None, graph_name=name[:200] or None,
        model_name=_cell(cells, cols["model_name"])[:200] or None,
        has_collectives=_flag(_cell(cells, cols["has_collectives"])),
        node_count=int(nodes) if nodes is not None else None,
        timestamp=parse_timestamp(_cell(cells, cols["timestamp"])),
        fx_passes_s=_seconds(_cell(cells, cols["fx_us"])), lower_s=_seconds(_cell(cells, cols["lower_us"])),
        compile_s=_seconds(_cell(cells, cols["compile_us"])))


def parse_table(text: str, path: str = "", t: float = 0.0) -> GraphStatsTable:
    table = GraphStatsTable(path=path)
    rows = list(csv.reader(io.StringIO(text.replace("\0", ""))))
    header = rows[0] if rows else []
    cols = {key: _column(header, names) for key, names in COLUMNS.items()}
    if cols["graph_name"] is None and cols["graph_id"] is None:
        table.refused = f"{path or 'graph_stats'}: no graph_id or graph_name column; not a graph_stats table"
        return table
    m = _RANK_IN_NAME.search(Path(path).name)
    file_rank = int(m.group(1)) if m else None
    for i, cells in enumerate(rows[1:], start=1):
        if not any(c.strip() for c in cells):
            continue
        try:
            table.rows.append(_row(cells, cols, file_rank, path, i, t))
        except (ValueError, IndexError, OverflowError):
            table.reject(",".join(cells))
    return table


def read_table(path: Path, t: float = 0.0) -> GraphStatsTable:
    try:  # a regular file only, never through a link: a FIFO put there must not hang the run's end
        with open_regular_stream(path, "a graph_stats table", follow=False) as f:
            text = f.read(MAX_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:  # InputRefused is one: its message is the line
        return GraphStatsTable(path=str(path), refused=f"{path}: {exc.strerror or exc}")
    return parse_table(text, str(path), t)


def _is_graph_stats_file(p: Path) -> bool:
    """The graph_stats tables of a metrics folder (other enabled tables are not ours to read)."""
    return p.suffix == ".csv" and ("graph_stats" in p.name or not p.name.startswith("metric_table_"))


class GraphStatsFolder:
    """Reads the graph_stats CSVs of a folder as they appear and grow: each ``poll`` returns the
    rows not returned before (per file), in the order of their timestamps."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._seen: dict[str, int] = {}
        self._problems: dict[str, int] = {}

    @property
    def problems(self) -> int:
        return sum(self._problems.values())

    def poll(self, t: float) -> list[NeuronGraphStat]:
        events: list[NeuronGraphStat] = []
        try:
            files = sorted(p for p in self.folder.glob("*.csv")
                           if _is_graph_stats_file(p) and p.is_file() and not p.is_symlink())
        except OSError:
            return events
        for path in files:
            table = read_table(path, t)
            new = table.rows[self._seen.get(str(path), 0):]
            self._seen[str(path)] = len(table.rows)
            self._problems[str(path)] = table.problems
            events += sorted(new, key=lambda r: (r.timestamp is None, r.timestamp or 0.0, r.row))
        return events


def metrics_environment(base: dict[str, str], run_dir: Path) -> tuple[dict[str, str], Path | None]:
    """(variables to add to the workload's environment, the folder whose graph_stats tables to
    read at its exit). The user's own setting of either variable is left alone (their folder is
    read when they enabled graph_stats); else both point into a private folder of the run
    (made here, mode 0700). The variables are read by torch-neuronx only: other runs ignore them."""
    if ENABLE_VAR in base or DIR_VAR in base:
        tables = [x.strip() for x in base.get(ENABLE_VAR, "").split(",")]
        folder = base.get(DIR_VAR)
        return {}, (Path(folder) if folder and "graph_stats" in tables else None)
    folder = RunPaths(run_dir).neuron_metrics
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return {}, None  # planted: not ours to write into
    except OSError:
        return {}, None
    return {ENABLE_VAR: "graph_stats", DIR_VAR: str(folder)}, folder


def user_metrics_notice(base: dict[str, str]) -> str | None:
    """Said once when the user set TorchNeuron's metric variables: neurondesk leaves them alone
    (as it does PT_XLA_DEBUG), and whether the compile split can still be read."""
    if ENABLE_VAR not in base and DIR_VAR not in base:
        return None
    _, folder = metrics_environment(base, Path("."))
    if folder is not None:
        return f"{ENABLE_VAR} and {DIR_VAR} set by you: neurondesk reads the graph_stats tables in {folder} at exit"
    return (f"{ENABLE_VAR}/{DIR_VAR} set by you without graph_stats and a folder: neurondesk leaves them alone, "
            f"so TorchNeuron's compile split (FX passes / lowering / compile) is not read; add graph_stats to "
            f"{ENABLE_VAR} and set {DIR_VAR}, or unset both to have it")
