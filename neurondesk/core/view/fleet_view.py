"""FleetScreen: one immutable reading of a fleet refresh (core/job/fleet.py's FleetRead) for the fleet screen,
its table and its JSON (views/fleet.py): each row with how long it has been stale, the totals and the job's
view, computed here once a refresh, so the screen only renders."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.job.fleet import FleetRead, FleetRow, FleetTotals, fleet_totals
from neurondesk.core.job.job_view import JobView, job_view, pick_job


@dataclass(frozen=True)
class FleetLine:
    row: FleetRow
    stale_for_s: float | None  # None: not stale, or stale since an unknown time


@dataclass(frozen=True)
class FleetScreen:
    now: float  # Prometheus's time of the read
    lines: tuple[FleetLine, ...]
    totals: FleetTotals
    job: JobView | None  # the job asked for, or the one with most nodes; None: no job in the read


def fleet_screen(read: FleetRead, job: str | None = None) -> FleetScreen:
    chosen = pick_job(read, job)
    return FleetScreen(now=read.now, lines=tuple(FleetLine(r, r.stale_for_s(read.now)) for r in read.rows),
                       totals=fleet_totals(read.rows), job=None if chosen is None else job_view(read, chosen))
