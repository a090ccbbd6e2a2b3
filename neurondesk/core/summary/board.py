"""The cost board: run summaries grouped by period (UTC day or ISO week) and device. Pure.

Per group: runs, steps, cost (sum of each run's cost so far), $/1k steps all-in (total cost ÷
total steps of the priced runs), $/1k steps steady and $/1M tokens (step-weighted means of the
priced runs' own figures), and the compile share (compile wall time ÷ elapsed wall time, over
all runs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from neurondesk.core.summary.types import Summary

PERIODS = ("day", "week")
_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime) -> datetime:
    """'7d', '12h', '2w', '30m' before ``now``, or an ISO date/time (naive = UTC). ValueError otherwise."""
    m = _SINCE.match(text)
    if m:
        return now - timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r}: give a span like 7d, 12h, 2w, 30m or a date like 2026-11-01") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def period_of(started_at: str | None, group_by: str | None) -> str:
    if group_by is None:
        return "all"
    try:
        t = datetime.fromisoformat(started_at or "")
    except ValueError:
        return "unknown"
    t = (t if t.tzinfo else t.replace(tzinfo=UTC)).astimezone(UTC)
    if group_by == "week":
        year, week, _ = t.isocalendar()
        return f"{year}-W{week:02d}"
    return t.date().isoformat()


def device_of(s: Summary) -> str:
    kind, inst = s.device.kind or "unknown", s.cost.instance_type
    return f"{kind} @ {inst}" if inst else kind


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _weighted(pairs: list[tuple[float | None, float]]) -> float | None:
    known = [(v, w) for v, w in pairs if v is not None and w > 0]
    total = sum(w for _, w in known)
    return sum(v * w for v, w in known) / total if total > 0 else None


def cost_board(summaries: Sequence[Summary], group_by: str | None = "week") -> list[dict[str, Any]]:
    """One dict per (period, device), newest period first, devices in name order."""
    if group_by is not None and group_by not in PERIODS:
        raise ValueError(f"--group-by {group_by!r}: expected one of {', '.join(PERIODS)}")
    groups: dict[tuple[str, str], list[Summary]] = {}
    for s in summaries:
        groups.setdefault((period_of(s.started_at, group_by), device_of(s)), []).append(s)
    rows = []
    for (period, device), runs in groups.items():
        steps = [float(s.steps) for s in runs]
        cost = [s.cost for s in runs]
        total = [_num(c.total_usd) for c in cost]
        priced_steps = sum(n for n, t in zip(steps, total, strict=True) if t is not None)
        usd = sum(t for t in total if t is not None)
        elapsed = [_num(s.elapsed_s) or 0.0 for s in runs]
        # of the wall time, priced or not: the figures' (cost.compile_share is the share of the cost since
        # an unpriced run has none; a summary without figures, written before, has the wall share there)
        walls = [s.figures.compile_share if s.figures is not None else s.cost.compile_share for s in runs]
        share = _weighted([(_num(w), e) for w, e in zip(walls, elapsed, strict=True)])
        rows.append({
            "period": period,
            "device": device,
            "runs": len(runs),
            "priced_runs": sum(t is not None for t in total),
            "steps": int(sum(steps)),
            "cost_usd": usd if any(t is not None for t in total) else None,
            "per_1k_steps_all_in_usd": usd / priced_steps * 1000 if priced_steps > 0 else None,
            "per_1k_steps_steady_usd": _weighted([(_num(c.per_1k_steps_steady_usd), n)
                                                  for c, n in zip(cost, steps, strict=True)]),
            "per_million_tokens_usd": _weighted([(_num(c.per_million_tokens_usd), n)
                                                 for c, n in zip(cost, steps, strict=True)]),
            "compile_share": share,
        })
    rows.sort(key=lambda r: r["device"])
    rows.sort(key=lambda r: r["period"], reverse=True)
    return rows
