"""The fleet: a table of every node and run Prometheus knows, and the job's totals.

``fleet_cells`` and ``totals_line`` are shared by the plain writers (``--once``) and the Textual
screen. The screen is handed a ``read`` callable (the CLI wires it to Prometheus): views never
touch collectors; ``read`` runs in a worker thread so a slow Prometheus never freezes the screen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Static

from neurondesk.core.fleet import FleetRow, FleetTotals, fleet_totals
from neurondesk.views.fmt import NONE, num, pct, secs, usd

HEADERS = ("job", "node", "run", "phase", "step", "steps/s", "samples/s", "compiling", "compiles",
           "recompiles", "stragglers", "data wait", "$/hour", "cost")
Read = Callable[[], tuple[list[FleetRow], float]]


def _int(x: int | None) -> str:
    return NONE if x is None else f"{x:,}"


def fleet_cells(row: FleetRow, now: float) -> list[str]:
    stale = row.stale_for_s(now)
    phase = row.phase or NONE
    if row.stale:
        phase = f"STALE {secs(stale, 0)} ({phase})" if stale is not None else f"STALE ({phase})"
    return [row.job_id or NONE, row.node, row.run_id, phase, _int(row.step), num(row.steps_per_s, 2),
            num(row.samples_per_s, 1), NONE if row.compiling_for_s is None else f"for {secs(row.compiling_for_s, 0)}",
            _int(row.compiles), _int(row.recompiles_after_warmup), _int(row.stragglers),
            pct(row.data_wait_fraction), usd(row.price_per_hour), usd(row.cost_usd)]


def totals_line(t: FleetTotals) -> str:
    slowest = NONE if t.slowest_node is None else f"{t.slowest_node} ({num(t.slowest_rate, 2)} {t.slowest_unit})"
    return (f"{t.nodes} node(s), {t.runs} run(s) · {usd(t.price_per_hour)}/hour · cost so far {usd(t.cost_usd)} · "
            f"slowest: {slowest} · in a compile wall: {t.compiling_nodes} · stale: {t.stale_nodes}")


def format_table(rows: list[FleetRow], now: float) -> str:
    cells = [fleet_cells(r, now) for r in rows]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(HEADERS)]

    def line(values: list[str] | tuple[str, ...]) -> str:
        return "  ".join(v.ljust(w) if i < 4 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths,
                                                                                           strict=True))).rstrip()
    body = [line(HEADERS), *(line(c) for c in cells)] if rows else ["no neurondesk series in Prometheus yet"]
    return "\n".join([*body, "", "job: " + totals_line(fleet_totals(rows))]) + "\n"


def to_json(rows: list[FleetRow], now: float) -> str:
    out = {"time": now, "rows": [dataclasses.asdict(r) | {"stale_for_s": r.stale_for_s(now)} for r in rows],
           "totals": dataclasses.asdict(fleet_totals(rows))}
    return json.dumps(out, indent=2) + "\n"


class FleetApp(App):
    """Refreshes every ``refresh_s``; an error keeps the last table and says why under it."""

    TITLE = "neurondesk fleet"
    BINDINGS = [("q", "quit", "Quit"), ("r", "refresh", "Refresh now")]
    CSS = "#totals { height: auto; padding: 0 1; } #error { color: red; height: auto; padding: 0 1; }"

    def __init__(self, read: Read, source: str, refresh_s: float = 1.0) -> None:
        super().__init__()
        self.read, self.source, self.refresh_s = read, source, refresh_s
        self.sub_title = source
        self.refreshes = 0
        self._keys: list[str] = []
        self._cells: dict[str, list[str]] = {}

    def compose(self) -> ComposeResult:
        yield DataTable(id="fleet", zebra_stripes=True, cursor_type="row")
        yield Static("", id="totals")
        yield Static("", id="error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*HEADERS)
        self.action_refresh()
        self.set_interval(self.refresh_s, self.action_refresh)

    def action_refresh(self) -> None:
        self.run_worker(self._read, thread=True, exclusive=True, group="read")

    def _read(self) -> None:
        try:
            rows, now = self.read()
        except Exception as exc:  # noqa: BLE001 - Prometheus down or refusing: say so, keep the table
            self.call_from_thread(self._show_error, str(exc))
            return
        self.call_from_thread(self._show, rows, now)

    def _show_error(self, text: str) -> None:
        self.query_one("#error", Static).update(text)

    def _show(self, rows: list[FleetRow], now: float) -> None:
        """Same rows as before: only the cells that changed are updated (cheap at 1 s); else rebuilt."""
        table = self.query_one(DataTable)
        cells = {"/".join(r.key): fleet_cells(r, now) for r in rows}
        if list(cells) != self._keys:
            table.clear()
            for key, values in cells.items():
                table.add_row(*values, key=key)
            self._keys = list(cells)
        else:
            for key, values in cells.items():
                old = self._cells.get(key, [])
                for column, value in enumerate(values):
                    if column >= len(old) or old[column] != value:
                        table.update_cell_at(Coordinate(table.get_row_index(key), column), value)
        self._cells = cells
        self.query_one("#totals", Static).update("job: " + totals_line(fleet_totals(rows)))
        self.query_one("#error", Static).update("")
        self.refreshes += 1
