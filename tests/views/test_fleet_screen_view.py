"""The fleet screen computes nothing (issue 51 item 1): core/view/fleet_view.py's FleetScreen holds each row's
stale time, the totals and the job's view, built once a refresh; views/fleet.py only renders it (its table,
its JSON and the Textual screen). Rows from a fake Prometheus read (no Prometheus here)."""

from __future__ import annotations

import ast
import json

from conftest import REPO

from neurondesk.core.job.fleet import FleetRead, FleetRow, fleet_totals
from neurondesk.core.job.job_view import job_view
from neurondesk.core.view.fleet_view import fleet_screen
from neurondesk.views.fleet import format_table, to_json

NOW = 10_000.0


def row(node: str, rank: int, **kw) -> FleetRow:
    base = dict(job_id="j1", node=node, run_id=f"run-{node}", step=500, price_per_hour=21.5, cost_usd=10.0,
                samples_per_s=100.0 + rank, step_time_s=0.3, started_t=NOW - 3600, last_update_t=NOW,
                compiles=3, node_rank=rank, nodes=2, world_size=4)
    return FleetRow(**(base | kw))


READ = FleetRead([row("a", 0), row("b", 1, stale=True, last_update_t=NOW - 95.0)], [], NOW)


def test_the_screen_holds_each_rows_stale_time_the_totals_and_the_job_view():
    screen = fleet_screen(READ)
    assert [line.stale_for_s for line in screen.lines] == [None, 95.0]
    assert screen.totals == fleet_totals(READ.rows)
    assert screen.totals.stale_nodes == 1
    assert screen.job == job_view(READ, "j1")
    assert fleet_screen(READ, "j1").job == screen.job
    assert fleet_screen(FleetRead([], [], NOW)).job is None  # no job in the read


def test_the_table_and_the_json_show_the_screens_values():
    table = format_table(READ)
    assert "STALE 95 s" in table
    assert "stale: 1" in table
    out = json.loads(to_json(READ))
    assert [r["stale_for_s"] for r in out["rows"]] == [None, 95.0]
    assert out["totals"]["stale_nodes"] == 1
    assert out["job"]["job_id"] == "j1"


def test_the_fleet_view_calls_no_figure_of_core():
    """views/fleet.py reads the FleetScreen: it calls none of core's figure functions itself."""
    tree = ast.parse((REPO / "neurondesk" / "views" / "fleet.py").read_text())
    called = {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)}
    assert called & {"fleet_totals", "job_view", "pick_job", "stale_for_s", "job_figures", "node_figures"} == set()
