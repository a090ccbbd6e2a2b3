"""The fleet: a table of every node and run Prometheus knows, and the job's totals.

``fleet_cells`` and ``totals_line`` are shared by the plain writers (``--once``) and the Textual
screen. The screen is handed a ``read`` callable (the CLI wires it to Prometheus): views never
touch collectors; ``read`` runs in a worker thread so a slow Prometheus never freezes the screen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import ScrollableContainer
from textual.widgets import Footer, Static

from neurondesk.core.job.fleet import FleetRead, FleetRow, FleetTotals
from neurondesk.core.view.fleet_view import FleetLine, FleetScreen, fleet_screen
from neurondesk.reports.fmt import NONE, num, pct, rate, secs, usd
from neurondesk.reports.job_text import job_json, job_lines

HEADERS = ("job", "node", "run", "phase", "step", "steps/s", "samples/s", "compiling", "compiles",
           "recompiles", "stragglers", "data wait", "$/hour", "cost")
Read = Callable[[], FleetRead]


def _int(x: int | None) -> str:
    return NONE if x is None else f"{x:,}"


def fleet_cells(line: FleetLine) -> list[str]:
    row, stale = line.row, line.stale_for_s
    phase = row.phase or NONE
    if row.stale:
        phase = f"STALE {secs(stale, 0)} ({phase})" if stale is not None else f"STALE ({phase})"
    return [row.job_id or NONE, row.node, row.run_id, phase, _int(row.step), num(row.steps_per_s, 2),
            rate(row.samples_per_s), NONE if row.compiling_for_s is None else f"for {secs(row.compiling_for_s, 0)}",
            _int(row.compiles), _int(row.recompiles_after_warmup), _int(row.stragglers),
            pct(row.data_wait_fraction), usd(row.price_per_hour), usd(row.cost_usd)]


def totals_line(t: FleetTotals) -> str:
    slowest = NONE if t.slowest_node is None else f"{t.slowest_node} ({num(t.slowest_rate, 2)} {t.slowest_unit})"
    return (f"{t.nodes} node(s), {t.runs} run(s) · {usd(t.price_per_hour)}/hour · cost so far {usd(t.cost_usd)} · "
            f"slowest: {slowest} · in a compile wall: {t.compiling_nodes} · stale: {t.stale_nodes}")


def table_lines(rows: tuple[FleetLine, ...]) -> list[str]:
    """The header, then one line per row (aligned columns); empty rows: a line that says so."""
    cells = [fleet_cells(r) for r in rows]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(HEADERS)]

    def line(values: list[str] | tuple[str, ...]) -> str:
        return "  ".join(v.ljust(w) if i < 4 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths,
                                                                                           strict=True))).rstrip()
    return [line(HEADERS), *(line(c) for c in cells)] if rows else ["no neurondesk series in Prometheus yet"]


def read_job_lines(read: FleetRead, job: str | None) -> list[str]:
    """The job's lines (core/job/job_view.py), for the job asked for or the one with most nodes."""
    return screen_job_lines(fleet_screen(read, job))


def screen_job_lines(screen: FleetScreen) -> list[str]:
    return [] if screen.job is None else job_lines(screen.job)


def format_table(read: FleetRead, job: str | None = None) -> str:
    screen = fleet_screen(read, job)
    return "\n".join([*table_lines(screen.lines), "", "totals: " + totals_line(screen.totals),
                      *screen_job_lines(screen)]) + "\n"


def table_text(rows: tuple[FleetLine, ...]) -> Text:
    """The table for the screen: one Text (a DataTable re-renders every cell of every row each
    refresh, ten times the CPU at 64 nodes), stale rows in yellow, compiling rows in magenta."""
    lines = table_lines(rows)
    text = Text("\n".join(lines), no_wrap=True, overflow="crop")
    text.stylize("bold", 0, len(lines[0]))
    offset = len(lines[0]) + 1
    for row, line in zip((r.row for r in rows), lines[1:], strict=False):
        style = "yellow" if row.stale else "magenta" if row.compiling_for_s is not None else None
        if style:
            text.stylize(style, offset, offset + len(line))
        offset += len(line) + 1
    return text


def to_json(read: FleetRead, job: str | None = None) -> str:
    screen = fleet_screen(read, job)
    out = {"time": screen.now, "rows": [dataclasses.asdict(r.row) | {"stale_for_s": r.stale_for_s} for r in screen.lines],
           "ranks": [dataclasses.asdict(k) | {"wait_s": k.wait_s} for k in read.ranks],
           "totals": dataclasses.asdict(screen.totals),
           "job": None if screen.job is None else job_json(screen.job)}
    return json.dumps(out, indent=2) + "\n"


class FleetApp(App):
    """Refreshes every ``refresh_s``; an error keeps the last table and says why under it."""

    TITLE = "neurondesk fleet"
    BINDINGS = [("q", "quit", "Quit"), ("r", "refresh", "Refresh now")]
    CSS = "#scroll { height: 1fr; } #fleet { width: auto; } #totals { height: auto; padding: 0 1; } #job { height: auto; padding: 0 1; color: $warning; } #error { color: red; height: auto; padding: 0 1; }"

    def __init__(self, read: Read, source: str, refresh_s: float = 1.0, job: str | None = None) -> None:
        super().__init__()
        self.read, self.source, self.refresh_s, self.job = read, source, refresh_s, job
        self.sub_title = source
        self.refreshes = 0
        self.rows: list[FleetRow] = []

    def compose(self) -> ComposeResult:
        with ScrollableContainer(id="scroll"):
            yield Static("waiting for Prometheus ...", id="fleet")
        yield Static("", id="totals")
        yield Static("", id="job")
        yield Static("", id="error")
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()
        self.set_interval(self.refresh_s, self.action_refresh)

    def action_refresh(self) -> None:
        self.run_worker(self._read, thread=True, exclusive=True, group="read")

    def _read(self) -> None:
        try:
            read = self.read()
        except Exception as exc:  # noqa: BLE001 - Prometheus down or refusing: say so, keep the table
            self.call_from_thread(self._show_error, str(exc))
            return
        self.call_from_thread(self._show, read)

    def _show_error(self, text: str) -> None:
        self.query_one("#error", Static).update(Text(text))

    def _show(self, read: FleetRead) -> None:
        screen = fleet_screen(read, self.job)  # every figure of the refresh, computed in core once
        self.rows = read.rows
        self.query_one("#fleet", Static).update(table_text(screen.lines))
        self.query_one("#totals", Static).update(Text("totals: " + totals_line(screen.totals)))
        self.query_one("#job", Static).update(Text("\n".join(screen_job_lines(screen))))
        self.query_one("#error", Static).update("")
        self.refreshes += 1
