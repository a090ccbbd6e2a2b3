"""Overview (the first tab on small terminals): one line per panel, what matters most."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Sparkline

from neurondesk.core.figures.phases import LABELS
from neurondesk.core.view.ranks_view import RanksView
from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.inputs import VERDICT_STYLE
from neurondesk.views.console.panel import Line, Panel
from neurondesk.views.console.phases_view import VERDICT_STYLE as PHASE_VERDICT_STYLE


class OverviewPanel(Panel):
    NAME = "Overview"
    KEY = "o"
    TIME_DEPENDENT = True

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_class("tab-only")

    def _ranks_text(self, ranks: RanksView) -> Text:
        """'4 ranks · slowest 60.2 ms/step · straggler: rank 3 +40 ms before sync (data)', one line
        (the stragglers are core's, compared again every few seconds: core/view/ranks_view.py)."""
        stragglers = ranks.comparison.stragglers if ranks.comparison is not None else ()
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

    def render_view(self, view: RunView) -> None:
        t = Text()

        def row(label: str, value: Text | str) -> None:
            t.append(f"{label:<12}", style="bold")
            t.append_text(value if isinstance(value, Text) else Text(value))
            t.append("\n")

        c, compiles = view.figures, view.compiles
        comp = Text(f"{c.compile_count} ({fmt.secs(c.compile_total_s)}, first {fmt.secs(c.first_compile_s)})")
        if c.recompiles_after_warmup:
            comp.append(f" · {c.recompiles_after_warmup} after warm-up", style="bold red")
        if view.open_compile is not None:
            comp.append(f" · compiling {fmt.clock(view.open_compile.open_s)}", style="bold yellow")
        row("Compiles", comp)
        row("", Text(compiles.graphs_per_step, style="dim"))
        if view.ranks.world > 1:
            row("Ranks", self._ranks_text(view.ranks))
        row("Throughput", f"{fmt.ms(c.step_time_s)}/step · "
                          f"{fmt.rate(c.samples_per_s)} samples/s · "
                          f"{fmt.rate(c.tokens_per_s)} tokens/s (steady)")
        inputs = view.inputs
        inp = Text(f"data wait {fmt.pct(c.data_wait_fraction)} ")
        inp.append(inputs.verdict, style=VERDICT_STYLE.get(inputs.verdict, ""))
        if inputs.process_tree is not None:
            inp.append(f" · workload CPU {inputs.process_tree.total_cpu_percent:.0f}% · "
                       f"{inputs.process_tree.dataloader_workers} loader workers")
        row("Input", inp)
        if c.step_phases is not None:  # the steady split (core/figures/phases.py), its three largest phases
            ph = c.step_phases
            phases = Text()
            phases.append(f"{ph.verdict}", style=PHASE_VERDICT_STYLE.get(ph.verdict or "", "bold yellow"))
            phases.append(" " + " · ".join(f"{LABELS.get(x.name, x.name)} {fmt.pct(x.share)}" for x in ph.split[:3]))
            row("Phases", phases)
        row("Cost", f"{fmt.usd(c.price_per_hour)}/h · {fmt.usd(c.total_usd)} so far · "
                    f"{fmt.usd(c.per_1k_steps_steady_usd)}/1k steps · projected {fmt.usd(c.projected_usd)}")
        devices = view.devices
        if devices.units:
            utils = " ".join(fmt.pct(u.util, 0) for u in devices.units[:8] if u.util is not None)
            row("Devices", f"{devices.kind} {utils}" + (" …" if len(devices.units) > 8 else ""))
        else:
            row("Devices", Text("no samples yet", style="dim"))
        if c.crash is not None:  # how it died (core/findings/crash.py): the kind, the finding, what to try
            row("Died", Text(clean(f"{c.crash.kind}: {c.crash.finding}; try: {c.crash.try_next}"), style="bold red"))
        g = c.goodput  # productive share, badput, restarts (core/figures/goodput.py)
        if g is not None and g.restarts:
            row("Goodput", Text(clean(g.words() + (f" · {g.ended}" if g.restarts else "")),
                                style="bold yellow" if g.restarts else ""))
            for d in g.disruptions[-3:]:  # the disruptions on the run's time line
                at = fmt.clock(d.at_s) if d.at_s is not None else "?"
                row("Disruption", Text(clean(f"{at} attempt {d.attempt}: rank {d.rank if d.rank is not None else '?'} "
                                             f"at step {d.step}: {d.cause[:120]}"), style="yellow"))
        if c.memory_creep is not None:  # a trend over the steady steps (core/findings/memory_creep.py)
            row("Memory", Text(fmt.ellipsize(clean(c.memory_creep.short), max(10, self.size.width - 16)),
                               style="bold yellow"))
        for d in view.diagnostics:
            if d.kind == "graph-grows" or view.finished:
                row("Diagnosis", Text(clean(d.message), style="bold red" if d.kind == "graph-grows" else "yellow"))
        last = clean(view.log.lines[-1].text) if view.log.lines else "—"
        row("Last line", Text(fmt.ellipsize(last, max(10, self.size.width - 16)), style="dim"))
        self.query_one("#overview-text", Line).show(t)
        spark = self.query_one("#overview-spark", Sparkline)
        data = list(view.plain_step_times[-max(8, self.size.width - 4):])
        if data:
            self.query_one("#overview-caption", Line).show(
                Text(f"step time, last {len(data)} steps that compiled nothing", style="dim"))
        if data != spark.data:
            spark.data = data
