"""The run index: one SQLite row per run (``runs.sqlite`` in the run root), for listing and compare.

The index is a cache of each run's summary.json (kept whole in ``summary_json``), so a broken
index never loses a run: the run directories still hold everything. WAL mode lets the console
read while a finishing run writes; the busy timeout is short so nobody hangs on a stuck lock.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started_at TEXT,
    started_ts REAL,               -- Unix seconds, for ordering and --since
    command TEXT,
    device_kind TEXT,
    device_name TEXT,
    steps INTEGER,
    steady_samples_per_s REAL,
    usd_per_1k_steps_steady REAL,
    usd_per_1k_steps_all_in REAL,
    usd_per_million_tokens REAL,
    compile_total_s REAL,
    exit_code INTEGER,
    run_dir TEXT NOT NULL,
    summary_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_ts);
"""
_COLUMNS = (
    "id", "started_at", "started_ts", "command", "device_kind", "device_name", "steps",
    "steady_samples_per_s", "usd_per_1k_steps_steady", "usd_per_1k_steps_all_in",
    "usd_per_million_tokens", "compile_total_s", "exit_code", "run_dir", "summary_json",
)  # fmt: skip


class RunIndexError(Exception):
    """The index file cannot be used; the message names it and what to do."""


@dataclass(frozen=True)
class RunRow:
    id: str
    started_at: str | None
    command: str | None
    device_kind: str | None
    device_name: str | None
    steps: int | None
    steady_samples_per_s: float | None
    usd_per_1k_steps_steady: float | None
    usd_per_1k_steps_all_in: float | None
    usd_per_million_tokens: float | None
    compile_total_s: float | None
    exit_code: int | None
    run_dir: str
    summary: dict[str, Any]


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _timestamp(iso: Any) -> float | None:
    """ISO text to Unix seconds; a naive time counts as local time (as datetime.timestamp does)."""
    try:
        return datetime.fromisoformat(iso).timestamp() if isinstance(iso, str) else None
    except ValueError:
        return None


class RunIndex:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
            if row[0] is None:
                conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION,))
                conn.commit()
            elif row[0] > SCHEMA_VERSION:
                raise RunIndexError(
                    f"run index {self.path} has schema {row[0]}, newer than this neurondesk "
                    f"({SCHEMA_VERSION}); upgrade neurondesk or point NEURONDESK_HOME elsewhere"
                )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not os.path.lexists(self.path):  # private to its owner (sqlite would make it 0644)
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
            with closing(sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)) as conn:
                yield conn
        except (sqlite3.DatabaseError, OSError) as e:
            raise RunIndexError(
                f"run index {self.path} is unusable ({e}); move it aside and it will be rebuilt "
                "empty: the runs themselves stay in their run directories"
            ) from e

    def record(self, summary: dict[str, Any], run_dir: Path | str) -> None:
        """Insert or replace the row for ``summary["run_id"]``."""
        run_id = summary.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise ValueError(f"summary for {run_dir} has no run_id; cannot index it")
        command = summary.get("command")
        if isinstance(command, list):
            command = shlex.join(str(c) for c in command)
        values = (
            run_id,
            summary.get("started_at"),
            _timestamp(summary.get("started_at")),
            command,
            _get(summary, "device", "kind"),
            _get(summary, "device", "name"),
            summary.get("steps"),
            _get(summary, "steady", "samples_per_s"),
            _get(summary, "cost", "per_1k_steps_steady_usd"),
            _get(summary, "cost", "per_1k_steps_all_in_usd"),
            _get(summary, "cost", "per_million_tokens_usd"),
            summary.get("compile_total_s"),
            summary.get("exit_code"),
            str(run_dir),
            json.dumps(summary, default=str),
        )
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
        sql = (
            f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}"
        )
        with self._connect() as conn, conn:
            conn.execute(sql, values)

    def list_runs(self, since: datetime | None = None, limit: int = 50) -> list[RunRow]:
        """Newest first; ``since`` keeps runs started at or after it (naive = local time)."""
        cols = [c for c in _COLUMNS if c not in ("started_ts", "summary_json")] + ["summary_json"]
        sql = f"SELECT {', '.join(cols)} FROM runs"
        args: list[Any] = []
        if since is not None:
            sql += " WHERE started_ts >= ?"
            args.append(since.timestamp())
        sql += " ORDER BY started_ts DESC, id DESC LIMIT ?"
        args.append(limit)
        with self._connect() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [RunRow(*r[:-1], summary=json.loads(r[-1])) for r in rows]
