"""Overview (the first tab on small terminals): one line per panel, what matters most."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Sparkline

from neurondesk.core.figures.phases import LABELS
from neurondesk.core.findings.diagnostics import diagnostics
from neurondesk.core.reduce.state import RunState
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.derived import device_units, figures, split_text
from neurondesk.views.console.inputs import VERDICT_STYLE
from neurondesk.views.console.panel import Line, Panel
from neurondesk.views.console.phases_view import VERDICT_STYLE as PHASE_VERDICT_STYLE

RANKS_EVERY = 4  # frames between two straggler searches (as the Ranks panel)


class OverviewPanel(Panel):
    NAME = "Overview"
    KEY = "o"
    TIME_DEPENDENT = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_class("tab-only")
        self._frame = 0
        self._stragglers: tuple[int, list] | None = None  # (frame, stragglers) for the Ranks row

    def update_view(self, state: RunState, now: float, frame: int = 0) -> None:
        self._frame = frame
        super().update_view(state, now, frame)

    def _ranks_text(self, state: RunState) -> Text:
        """'4 ranks · slowest 60.2 ms/step · straggler: rank 3 +40 ms before sync (data)', one line;
        the stragglers are found again at most every RANKS_EVERY frames (their cost grows with
        ranks x steps)."""
        ranks = state.parts.ranks
        cached = self._stragglers
        if cached is None or self._frame - cached[0] >= RANKS_EVERY or self._frame < cached[0] or state.finished:
            cached = self._stragglers = (self._frame, ranks.stragglers())
        stragglers = cached[1]
        t = Text(f"{ranks.world} ranks · ")
        failed = ranks.failed_first  # first: the line is cut at the panel's width
        if failed is not None:
            t.append(f"rank {failed.rank if failed.rank is not None else '?'} failed", style="bold red")
            t.append(" · ")
        t.append(f"slowest {fmt.ms(ranks.job_step_time_s)}/step · ")
        if stragglers:
            t.append("straggler" + ("s" if len(stragglers) > 1 else "") + ": "
                     + ", ".join(x.words() for x in stragglers[:2])
                     + (f" +{len(stragglers) - 2} more" if len(stragglers) > 2 else ""), style="bold yellow")
        else:
            t.append("no straggler", style="dim")
        t.truncate(max(20, self.size.width - 14), overflow="ellipsis")  # one line: the Ranks panel says all
        return t

    def compose(self) -> ComposeResult:
        yield Line(id="overview-text")
        yield Line(id="overview-caption")
        yield Sparkline([], id="overview-spark")

    def render_state(self, state: RunState, now: float) -> None:
        t = Text()

        def row(label: str, value: Text | str) -> None:
            t.append(f"{label:<12}", style="bold")
            t.append_text(value if isinstance(value, Text) else Text(value))
            t.append("\n")

        since = state.open_compile_since()
        comp = Text(f"{state.parts.compiles.compile_count} ({fmt.secs(state.compile_total_s)}, first "
                    f"{fmt.secs(state.first_compile_s)})")
        if state.recompiles_after_warmup:
            comp.append(f" · {state.recompiles_after_warmup} after warm-up", style="bold red")
        if since is not None:
            comp.append(f" · compiling {fmt.clock(now - since)}", style="bold yellow")
        row("Compiles", comp)
        row("", Text(split_text(state), style="dim"))
        if state.parts.ranks.world > 1:
            row("Ranks", self._ranks_text(state))
        c = figures(state, now)
        row("Throughput", f"{fmt.ms(c.step_time_s)}/step · "
                          f"{fmt.num(c.samples_per_s)} samples/s · "
                          f"{fmt.num(c.tokens_per_s, 0)} tokens/s (steady)")
        verdict = state.input_verdict()
        inp = Text(f"data wait {fmt.pct(c.data_wait_fraction)} ")
        inp.append(verdict, style=VERDICT_STYLE.get(verdict, ""))
        if state.process_tree is not None:
            inp.append(f" · workload CPU {state.process_tree.total_cpu_percent:.0f}% · "
                       f"{state.process_tree.dataloader_workers} loader workers")
        row("Input", inp)
        if c.step_phases is not None:  # the steady split (core/figures/phases.py), its three largest phases
            ph = c.step_phases
            phases = Text()
            phases.append(f"{ph.verdict}", style=PHASE_VERDICT_STYLE.get(ph.verdict or "", "bold yellow"))
            phases.append(" " + " · ".join(f"{LABELS.get(x.name, x.name)} {fmt.pct(x.share)}" for x in ph.split[:3]))
            row("Phases", phases)
        row("Cost", f"{fmt.usd(c.price_per_hour)}/h · {fmt.usd(c.total_usd)} so far · "
                    f"{fmt.usd(c.per_1k_steps_steady_usd)}/1k steps · projected {fmt.usd(c.projected_usd)}")
        kind, units, _ = device_units(state)
        if units:
            utils = " ".join(f"{u.util * 100:.0f}%" for u in units[:8] if u.util is not None)
            row("Devices", f"{kind} {utils}" + (" …" if len(units) > 8 else ""))
        else:
            row("Devices", Text("no samples yet", style="dim"))
        if c.crash is not None:  # how it died (core/findings/crash.py): the kind, the finding, what to try
            row("Died", Text(clean(f"{c.crash.kind}: {c.crash.finding}; try: {c.crash.try_next}"), style="bold red"))
        if c.memory_creep is not None:  # a trend over the steady steps (core/findings/memory_creep.py)
            row("Memory", Text(fmt.ellipsize(clean(c.memory_creep.short), max(10, self.size.width - 16)),
                               style="bold yellow"))
        for d in diagnostics(state):
            if d.kind == "graph-grows" or state.finished:
                row("Diagnosis", Text(clean(d.message), style="bold red" if d.kind == "graph-grows" else "yellow"))
        last = clean(state.output[-1].text) if state.output else "—"
        row("Last line", Text(fmt.ellipsize(last, max(10, self.size.width - 16)), style="dim"))
        self.query_one("#overview-text", Line).show(t)
        spark = self.query_one("#overview-spark", Sparkline)
        data = [r.duration_s for r in state.history if not r.compiled][-max(8, self.size.width - 4):]
        if data:
            self.query_one("#overview-caption", Line).show(
                Text(f"step time, last {len(data)} steps that compiled nothing", style="dim"))
        if data != spark.data:
            spark.data = data
