"""Compiles: count, total, first; the live wall timer; the table of compile events; the detail
of the highlighted one; graph executions per step and the split point; the advice (core.advice)
for the highlighted row's line: the shape buckets to pad to, a value read inside the step, a
split step, a growing graph."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable

from neurondesk.core.findings.advice import advise
from neurondesk.core.reduce.state import CompileRecord, RunState
from neurondesk.reports import fmt
from neurondesk.reports.advice_text import KIND_TITLE
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.advice_panels import advice_lines
from neurondesk.views.console.derived import split_text
from neurondesk.views.console.panel import Line, Panel, kv

ADVISE_EVERY_S = 30.0  # live, the advice is costed again at most this often (it reads the whole step history)
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


def _first_error(state: RunState) -> str:
    e = state.errors[0]
    return f"{e.code or e.source} {' '.join(e.message.removeprefix(f'[{e.code}]').split())}"[:100]


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
        self._state: RunState | None = None
        self._sig: tuple = ()
        self._advice: list[dict] = []
        self._advised: tuple[int, float, bool] | None = None  # (compiles, now, finished) at the last costing

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

    def update_view(self, state: RunState, now: float, frame: int = 0) -> None:
        # steps arrive all the time but seldom change this panel: render when what it shows may
        # have changed (a compile, a late cache verdict, the split points), or the wall timer ticks
        since = state.open_compile_since()
        sig = (len(state.compiles), since, None if since is None else int(now - since), len(state.errors),
               tuple((c.cache, c.cause, c.reason, c.graph_hash) for c in state.compiles[-3:]),
               state.executions_per_step, sum(p.count for p in state.split_points.values()),
               len(state.graph_breaks), state.warmup_steps, state.finished, state.parts.telemetry.graph_stats.rows)
        if sig != self._sig or self._seen_events < 0:
            self._sig = sig
            self._seen_events = state.event_count
            self.render_state(state, now)

    def render_state(self, state: RunState, now: float) -> None:
        self._state = state
        counted = state.parts.compiles.compile_count
        stats = kv(("compiles", str(counted)), ("total", fmt.secs(state.compile_total_s)),
                   ("first", fmt.secs(state.first_compile_s)))
        if counted < len(state.compiles):  # graph_stats rows whose time another compile holds
            stats.append(f"  +{len(state.compiles) - counted} listed, held by other compiles", style="dim")
        late = state.recompiles_after_warmup
        stats.append("  ")
        stats.append(f"{late} after warm-up", style="bold red" if late else "dim")
        failed = sum(not c.ok for c in state.compiles)
        if failed:
            stats.append(f"  {failed} failed", style="bold red")
        if state.errors:
            stats.append(f"  errors {len(state.errors)}: {clean(_first_error(state))}", style="red")
        since = state.open_compile_since()
        if since is not None:
            stats.append("\n")
            stats.append(f" compiling #{len(state.compiles) + 1} — {fmt.clock(now - since)} and counting ",
                         style="bold black on yellow")
        stats.append("\n")
        stats.append(split_text(state), style="dim")
        if state.graph_breaks:
            stats.append(f"  graph breaks {len(state.graph_breaks)}", style="magenta")
        self.query_one("#compile-stats", Line).show(stats)
        self._cost_advice(state, now)
        self._sync_table(state)

    def _cost_advice(self, state: RunState, now: float) -> None:
        """core.advice on the state: once the compiles changed, at most every ADVISE_EVERY_S while
        the run goes on (the bucket search reads every step's shape), and once more at the end."""
        last = self._advised
        if last is not None and last[2] == state.finished and (
                last[0] == len(state.compiles) or now - last[1] < ADVISE_EVERY_S):
            return
        self._advised = (len(state.compiles), now, state.finished)
        self._advice = [a.as_dict() for a in advise(state)]

    def _sync_table(self, state: RunState) -> None:
        table = self.table
        total = len(state.compiles)
        new = state.compiles[max(self._rows, total - TABLE_ROWS):]
        follow = table.cursor_row >= table.row_count - 1
        for c in new:
            cells = _cells(c, state.warmup_steps)
            table.add_row(*cells, key=str(c.index))
            self._last_cells[c.index] = [x.plain for x in cells]
        self._rows = total
        while table.row_count > TABLE_ROWS:
            first = next(iter(table.rows))
            table.remove_row(first)
            self._last_cells.pop(int(first.value), None)
        # a record can still change after it arrived (cache verdict, guard reason): recheck the tail
        for c in state.compiles[-8:]:
            cells = _cells(c, state.warmup_steps)
            plain = [x.plain for x in cells]
            if self._last_cells.get(c.index) not in (None, plain):
                for col, cell in zip(table.columns, cells, strict=False):
                    table.update_cell(str(c.index), col, cell)
                self._last_cells[c.index] = plain
        if new and follow:
            table.move_cursor(row=table.row_count - 1, animate=False)
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        state = self._state
        table = self.table
        box = self.query_one("#compile-detail", Line)
        if state is None or table.row_count == 0:
            if state is not None and state.open_compile_since() is not None:
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
        if 1 <= index <= len(state.compiles):
            record = state.compiles[index - 1]
            text = detail(record, state.warmup_steps, box.content_size.width or 80)
            for split in state.parts.telemetry.graph_stats.splits_for(index)[:4]:  # TorchNeuron's graph_stats
                text.append("\n")
                text.append_text(kv(("TorchNeuron", clean(split.words()))))
            box.show(text)
            self.query_one("#compile-advice", Line).show(row_advice(self._advice, record))


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
