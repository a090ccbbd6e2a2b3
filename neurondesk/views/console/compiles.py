"""Compiles: count, total, first; the live wall timer; the table of compile events; the detail
of the highlighted one; graph executions per step and the split point; the advice (core.advice)
for the highlighted row's line: the shape buckets to pad to, a value read inside the step, a
split step, a growing graph. Everything shown is the frame's RunView (core/view/compiles_view.py)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable

from neurondesk.core.reduce.compile.compiles import CompileRecord
from neurondesk.core.view.compiles_view import CompilesView
from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.advice_text import KIND_TITLE
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.advice_panels import advice_lines
from neurondesk.views.console.panel import Line, Panel, kv

TABLE_ROWS = 500  # the table keeps the latest compiles; the figures above it count them all
COLUMNS = ("#", "step", "cause", "location", "duration", "cache", "status", "source")
STATUS_STYLE = {"ok": "dim", "failed": "bold red", "cached failure": "red"}
CAUSE_STYLE = {"first": "green", "shape-change": "bold red", "new-graph": "yellow", "value-access": "magenta"}


def _cells(c: CompileRecord, warmup: int) -> list[Text]:
    late = c.step is not None and c.step >= warmup
    style = "bold red" if late else ""
    cache = c.cache or "—"
    return [
        Text(str(c.index), style=style),
        Text("—" if c.step is None else str(c.step), style=style),
        Text(c.cause + (" ⚠" if late else ""), style=CAUSE_STYLE.get(c.cause, "") if not late else style),
        Text(clean(fmt.short_location(c.location) if c.location or not c.name else c.name)),
        Text(fmt.secs(c.duration_s, 2), justify="right"),
        Text(cache, style="green" if cache == "hit" else ("red" if cache == "failed" else "")),
        Text(c.status, style=STATUS_STYLE.get(c.status, "")),
        Text(clean(c.source), style="dim"),
    ]


def detail(c: CompileRecord, warmup: int, width: int = 80) -> Text:
    t = Text()
    t.append(f"compile #{c.index}", style="bold")
    t.append(clean(f"  step {c.step}  {c.cause}  {fmt.secs(c.duration_s, 2)}  cache {c.cache or '—'}  "
                   f"source {c.source}  trigger {c.trigger or '—'}  status "))
    t.append(c.status, style=STATUS_STYLE.get(c.status, ""))
    if c.step is not None and c.step >= warmup:
        t.append(f"  after warm-up (step ≥ {warmup})", style="bold red")
    t.append("\n")
    t.append_text(kv(("at", clean(c.location or "—")), *([("in", clean(c.library))] if c.library else []),
                     *([("graph name", clean(c.name))] if c.name else [])))
    t.append("\n")
    shapes = fmt.shapes(c.input_shapes)
    if c.previous_shapes:
        shapes = f"{fmt.shapes(c.previous_shapes)} → {shapes}"
    t.append_text(kv(("shapes", clean(shapes)), ("graph", clean(c.graph_hash or "—"))))
    if c.reason:
        t.append("\n")
        t.append_text(kv(("guard" if c.source == "dynamo" else "cause", clean(c.reason))))
    if c.graph_break:
        t.append("\n")
        t.append_text(kv(("graph break", clean(c.graph_break))))
    if c.error:
        t.append("\n")
        t.append(f"error: {clean(c.error)}", style="bold red")
    for frame in c.frames[:5]:
        t.append("\n  " + fmt.ellipsize_left(clean(frame), max(20, width - 2)), style="dim")
    return t


class CompilesPanel(Panel):
    NAME = "Compiles"
    KEY = "c"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._rows = 0  # compiles added to the table
        self._last_cells: dict[int, list[str]] = {}
        self._shown: CompilesView | None = None  # the section the panel shows
        self._compiling = False  # a compile was running at the last render

    def compose(self) -> ComposeResult:
        yield Line(id="compile-stats")
        table = DataTable(id="compile-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        yield Line(id="compile-detail")
        yield Line(id="compile-advice")

    @property
    def table(self) -> DataTable:
        return self.query_one("#compile-table", DataTable)

    def update_view(self, view: RunView, frame: int = 0) -> None:
        # steps arrive all the time but seldom change this panel: core keeps the section while what it
        # shows stays (a compile, a late cache verdict, the split points, the wall timer's second)
        if view.compiles is not self._shown or self._seen_events < 0:
            self._seen_events = view.event_count
            self.render_view(view)

    def render_view(self, view: RunView) -> None:
        c = self._shown = view.compiles
        stats = kv(("compiles", str(c.counted)), ("total", fmt.secs(c.total_s)), ("first", fmt.secs(c.first_s)))
        if c.held:  # graph_stats rows whose time another compile holds
            stats.append(f"  +{c.held} listed, held by other compiles", style="dim")
        stats.append("  ")
        stats.append(f"{c.after_warmup} after warm-up", style="bold red" if c.after_warmup else "dim")
        if c.failed:
            stats.append(f"  {c.failed} failed", style="bold red")
        if c.errors:
            stats.append(f"  errors {c.errors}: {clean(c.first_error or '')}", style="red")
        running = view.open_compile
        if running is not None:
            stats.append("\n")
            stats.append(f" compiling #{running.number} — {fmt.clock(running.open_s)} and counting ",
                         style="bold black on yellow")
        stats.append("\n")
        stats.append(c.graphs_per_step, style="dim")
        if c.graph_breaks:
            stats.append(f"  graph breaks {c.graph_breaks}", style="magenta")
        self.query_one("#compile-stats", Line).show(stats)
        self._compiling = running is not None
        self._sync_table(c)
        self._show_detail()

    def _sync_table(self, c: CompilesView) -> None:
        table = self.table
        total = len(c.records)
        new = c.records[max(self._rows, total - TABLE_ROWS):]
        follow = table.cursor_row >= table.row_count - 1
        for record in new:
            cells = _cells(record, c.warmup_steps)
            table.add_row(*cells, key=str(record.index))
            self._last_cells[record.index] = [x.plain for x in cells]
        self._rows = total
        while table.row_count > TABLE_ROWS:
            first = next(iter(table.rows))
            table.remove_row(first)
            self._last_cells.pop(int(first.value), None)
        # a record can still change after it arrived (cache verdict, guard reason): recheck the tail
        for record in c.records[-8:]:
            cells = _cells(record, c.warmup_steps)
            plain = [x.plain for x in cells]
            if self._last_cells.get(record.index) not in (None, plain):
                for col, cell in zip(table.columns, cells, strict=False):
                    table.update_cell(str(record.index), col, cell)
                self._last_cells[record.index] = plain
        if new and follow:
            table.move_cursor(row=table.row_count - 1, animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        c = self._shown
        table = self.table
        box = self.query_one("#compile-detail", Line)
        if c is None or table.row_count == 0:
            if self._compiling:
                box.show(Text("the first compile is running: its cause, place, shapes and graph hash "
                              "show here when it ends", style="yellow"))
            else:
                box.show(Text("no compiles yet: the first one starts with the first step", style="dim"))
            return
        try:
            key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        except Exception:  # noqa: BLE001 - cursor outside the table
            return
        index = int(key)
        if 1 <= index <= len(c.records):
            record = c.records[index - 1]
            text = detail(record, c.warmup_steps, box.content_size.width or 80)
            for words in c.splits.get(index, ()):  # TorchNeuron's graph_stats
                text.append("\n")
                text.append_text(kv(("TorchNeuron", clean(words))))
            box.show(text)
            self.query_one("#compile-advice", Line).show(row_advice(list(c.advised.advice), record))


def row_advice(advice: list[dict], record: CompileRecord) -> Text:
    """The advice for the highlighted compile's line; else where the advice is, in one dim line."""
    here = [a for a in advice if a.get("location") and a["location"] == record.location]
    if here:
        return advice_lines(here)
    if not advice:
        return Text()
    where = ", ".join(f"{KIND_TITLE.get(a['kind'], a['kind'])} at {fmt.short_location(a.get('location'))}"
                      for a in advice[:3])
    return Text(f"advice: {where} (select a compile there)", style="dim")
