"""The run index: one SQLite row per run (``runs.sqlite`` in the run root), for listing and compare.

The index is a cache of each run's summary.json (kept whole in ``summary_json``), so a broken
index never loses a run: the run directories still hold everything. WAL mode lets the console
read while a finishing run writes. A busy lock is waited for (a busy timeout per try, tries
until ``LOCK_PATIENCE_S``), so a row is not lost to another process holding the lock a while. A
row's summary is read by the contract (core/summary/types.py's load_summary) into the Summary every
reader takes; a row whose ``summary_json`` is not one, or whose columns have the wrong types, is
skipped by ``list_runs`` and counted in ``skipped``; ``neurondesk reindex`` rebuilds the index from
the run folders.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from neurondesk.core.summary.types import Summary, load_summary

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 2.0  # per try
LOCK_PATIENCE_S = 30.0  # tries go on this long while another process holds the lock

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
    summary: Summary


def _timestamp(iso: Any) -> float | None:
    """ISO text to Unix seconds; a naive time counts as local time (as datetime.timestamp does)."""
    try:
        return datetime.fromisoformat(iso).timestamp() if isinstance(iso, str) else None
    except ValueError:
        return None


_INT_COLS = ("steps", "exit_code")
_REAL_COLS = ("steady_samples_per_s", "usd_per_1k_steps_steady", "usd_per_1k_steps_all_in",
              "usd_per_million_tokens", "compile_total_s")
_TEXT_COLS = ("started_at", "command", "device_kind", "device_name")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_INT64 = range(-(2**63), 2**63)


def _sql_int(v: Any) -> Any:
    """An int SQLite can store (int64); a bigger one is no column value (its summary keeps it)."""
    return None if _is_int(v) and v not in _INT64 else v


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _stored_summary(text: Any) -> Summary | None:
    """A row's ``summary_json`` read by the contract; None when it is not a summary. (json.loads, not
    msgspec: the text holds a non-finite loss as NaN, which only Python's JSON reads.)"""
    try:
        return load_summary(json.loads(text))
    except (TypeError, ValueError, RecursionError):  # SummaryError is a ValueError
        return None


def _row(r: tuple, cols: list[str]) -> RunRow | None:
    """A stored row as a RunRow; None when it is not one (hand-edited, or written by a bug)."""
    d = dict(zip(cols, r, strict=True))
    summary = _stored_summary(d.pop("summary_json"))
    if summary is None or not isinstance(d["id"], str) or not isinstance(d["run_dir"], str):
        return None
    if any(d[c] is not None and not _is_int(d[c]) for c in _INT_COLS):
        return None
    if any(d[c] is not None and not _is_num(d[c]) for c in _REAL_COLS):
        return None
    if any(d[c] is not None and not isinstance(d[c], str) for c in _TEXT_COLS):
        return None
    return RunRow(**d, summary=summary)


def row_of(summary: Summary, run_dir: Path | str) -> RunRow | None:
    """The row ``record`` would store for ``summary``, without storing it (a live run, listed by
    `history` before its row exists); None when it could not be listed."""
    try:
        values = RunIndex._upsert(summary, run_dir)[1]
    except ValueError:
        return None
    d = dict(zip(_COLUMNS, values, strict=True))
    d.pop("started_ts")
    return _row(tuple(d.values()), list(d))


def _busy(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


class RunIndexBusy(RunIndexError):
    """Another process held the index's lock for longer than this reader's patience."""


class RunIndex:
    def __init__(self, path: Path | str, patience_s: float = LOCK_PATIENCE_S) -> None:
        """``patience_s``: how long a busy lock is waited for before RunIndexBusy (a finishing
        recorder waits little: its row is written later, by itself or by the next command)."""
        self.path = Path(path)
        self.patience_s = patience_s
        self.skipped = 0  # rows the last list_runs skipped as unreadable
        self._patiently(self._open)

    def _patiently(self, op: Callable[[], Any]) -> Any:
        """``op`` again while the database is locked by another process, up to ``patience_s``."""
        deadline = time.monotonic() + self.patience_s
        while True:
            try:
                return op()
            except RunIndexError as e:
                cause = e.__cause__
                busy = isinstance(cause, sqlite3.OperationalError) and _busy(cause)
                if busy and time.monotonic() > deadline:
                    raise RunIndexBusy(f"the run index {self.path} is locked by another process (waited "
                                       f"{self.patience_s:.0f} s)") from cause
                if not busy:
                    raise
                time.sleep(0.05)

    def _open(self) -> None:
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
            with closing(sqlite3.connect(self.path, timeout=min(BUSY_TIMEOUT_S, self.patience_s))) as conn:
                yield conn
        except (sqlite3.DatabaseError, OSError) as e:
            if _disk_trouble(e):
                raise RunIndexError(
                    f"cannot write the run index {self.path} ({e}): free disk space, then `neurondesk reindex` "
                    "adds the runs it missed (the runs themselves are in their run folders)") from e
            raise RunIndexError(
                f"run index {self.path} is unusable ({e}); `neurondesk reindex` rebuilds it from the run "
                "folders, which hold the runs themselves"
            ) from e

    def record(self, summary: Summary, run_dir: Path | str) -> None:
        """Insert or replace the row for ``summary.run_id``."""
        sql, values = self._upsert(summary, run_dir)

        def write() -> None:
            with self._connect() as conn, conn:
                conn.execute(sql, values)

        self._patiently(write)

    def replace_all(self, items: Iterable[tuple[Summary, Path | str]]) -> int:
        """Every row replaced by the rows of ``items`` (summary, run_dir), in one transaction."""
        rows = [self._upsert(s, d) for s, d in items]

        def write() -> None:
            with self._connect() as conn, conn:
                conn.execute("DELETE FROM runs")
                for sql, values in rows:
                    conn.execute(sql, values)

        self._patiently(write)
        return len(rows)

    @staticmethod
    def _upsert(s: Summary, run_dir: Path | str) -> tuple[str, tuple]:
        if not s.run_id:
            raise ValueError(f"summary for {run_dir} has no run_id; cannot index it")
        values = (
            s.run_id,
            s.started_at,
            _timestamp(s.started_at),
            shlex.join(str(c) for c in s.command),
            s.device.kind,
            s.device.name,
            s.steps,
            s.steady.samples_per_s,
            s.cost.per_1k_steps_steady_usd,
            s.cost.per_1k_steps_all_in_usd,
            s.cost.per_million_tokens_usd,
            s.compile_total_s,
            s.exit_code,
            str(run_dir),
            json.dumps(s.as_dict(), default=str),
        )
        values = tuple(_sql_int(v) for v in values)  # a step count of 10**30 loses its column, not its row
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
        sql = (
            f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
            f"ON CONFLICT(id) DO UPDATE SET {updates}"
        )
        return sql, values

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
        def read() -> list:
            with self._connect() as conn:
                return conn.execute(sql, args).fetchall()

        out = [_row(r, cols) for r in self._patiently(read)]
        self.skipped = sum(r is None for r in out)
        return [r for r in out if r is not None]


def _disk_trouble(e: Exception) -> bool:
    """A full disk or a failed write, not a broken index file."""
    if isinstance(e, OSError):
        return e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)
    text = str(e).lower()
    return "full" in text or "i/o" in text or "readonly" in text or "read-only" in text
