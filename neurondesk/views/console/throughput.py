"""Throughput: the step time against step as a line (rolling median over the steps that compiled
nothing, its p90 band, the compile steps marked; core.series), the loss against step beside it
(with the target line), the steady value and the rule that decided it, tokens/s, and the script's
own throughput figure beside it; under them the step split into its phases (views/console/phases_view.py)
once the probe times them. Drawn from the frame's RunView: the lines are core's (core/figures/series.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from neurondesk.core.figures.run_figures import FIGURES
from neurondesk.core.figures.series import chart_line_of, loss_line
from neurondesk.core.view.run_view import RunView, ThroughputView
from neurondesk.reports import fmt
from neurondesk.reports.summary_writer import script_rate_text
from neurondesk.views.console.panel import Line, Panel, kv
from neurondesk.views.console.phases_view import FULL_FROM_ROWS, columns_text, split_text

LEGEND_FROM_ROWS = 12  # a shorter panel in the grid: the phases' bar and verdict without their legend
REPLOT_FRAMES = 6  # the chart is the costly part: redrawn every 6th frame, 6 s (the figures: every 2nd, 2 s)


class ThroughputPanel(Panel):
    EVERY = 2
    NAME = "Throughput"
    KEY = "t"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._frame = 0
        self._plotted_steps = -1

    def compose(self) -> ComposeResult:
        with Horizontal(id="throughput-charts"):
            yield PlotextPlot(id="throughput-plot")
            yield PlotextPlot(id="loss-plot")
        yield Line(id="throughput-text")
        phases = Line(id="step-phases")
        phases.display = False  # until the probe times a step's phases: the screen as before
        yield phases

    def invalidate(self) -> None:
        super().invalidate()
        self._plotted_steps = -1

    def update_view(self, view: RunView, frame: int = 0) -> None:
        self._frame = frame
        super().update_view(view, frame)

    def render_view(self, view: RunView) -> None:
        self._text(view)
        self._phases(view)
        due = self._frame % REPLOT_FRAMES == 0 or self._plotted_steps < 0 or view.finished
        if view.figures.steps != self._plotted_steps and due:
            self._plot_step_time(view)
            self._plot_loss(view.throughput)
            self._plotted_steps = view.figures.steps

    def _text(self, view: RunView) -> None:
        f, tp = view.figures, view.throughput
        t = kv(("steady", f"{fmt.ms(f.step_time_s)}/step"),
               ("p90", fmt.ms(f.step_time_p90_s)),
               ("samples/s", fmt.rate(f.samples_per_s)),
               ("tokens/s", fmt.rate(f.tokens_per_s)))
        listed = [(info.label, fmt.value_text(getattr(f, info.name), info.kind)) for info in FIGURES
                  if info.panel == "throughput" and (getattr(f, info.name) or not info.quiet)]  # core's other figures
        if listed:
            t.append("\n")
            t.append_text(kv(*listed))
        t.append("\n")
        if tp.steady_from is None:
            rule = f"steady: not yet (needs a step ≥ {tp.warmup_steps} with no compile in it)"
        else:
            rule = (f"steady: mean of {f.steady_steps:,} steps from step {tp.steady_from} "
                    f"(step ≥ {tp.warmup_steps}, no compile)")
        t.append(rule, style="dim")
        rate = tp.script_rate  # the script's own figure beside the steady one; yellow when off by more than 10%
        if rate is not None:
            t.append("\nscript's own: ", style="dim")
            t.append(script_rate_text(rate), style="yellow" if rate.off else "")
        if tp.steps_lost:  # the step count is right (the probe's own counter); these steps are not charted
            t.append("\n" + tp.steps_lost, style="yellow")
        self.query_one("#throughput-text", Line).show(t)

    def _phases(self, view: RunView) -> None:
        """The steady split with its verdict, and the recent steps' stacked columns; nothing before
        the probe has timed a step's phases."""
        line = self.query_one("#step-phases", Line)
        width = max(20, self.content_size.width)
        split = view.figures.step_phases
        bars = view.throughput.step_bars[-(width - 12):]  # as many recent steps as columns
        line.display = split is not None or any(b.parts for b in bars)
        if not line.display:
            return
        full = self.app.tabbed or self.size.height >= FULL_FROM_ROWS  # beside the charts: compact, no columns
        t = (split_text(split, width, compact=not full, legend=full or self.size.height >= LEGEND_FROM_ROWS)
             if split is not None
             else Text("step phases: no steady step yet", style="dim"))
        if full and any(b.parts for b in bars):
            t.append("\n")
            t.append_text(columns_text(list(bars), width))
        line.show(t)

    def _plot_step_time(self, view: RunView) -> None:
        widget = self.query_one("#throughput-plot", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        chart = view.throughput.chart
        line = chart_line_of(chart, points=max(20, (widget.size.width - 10) * 2))
        if not line.steps and not line.compile_steps:
            plt.title("step time — waiting for the first step")
            widget.refresh()
            return
        med = [x * 1000 for x in line.median_s]
        p90 = [x * 1000 for x in line.p90_s]
        top = max(p90, default=0.0) * 1.25 or max(line.compile_s, default=1.0) * 1000
        if line.steps:
            if p90 != med:  # the p90 band's upper edge, dim: over the median line
                plt.plot(line.steps, p90, color="gray", marker="braille")
            plt.plot(line.steps, med, color="cyan", marker="braille")
        if line.compile_steps:  # compile steps take seconds: marked at the top, not drawn to scale
            plt.scatter(line.compile_steps[-200:], [top] * len(line.compile_steps[-200:]), color="red", marker="x")
        step_time = view.figures.step_time_s
        if step_time is not None:
            plt.hline(step_time * 1000, color="orange")
        plt.ylim(0, top * 1.05)
        plt.xlim(*x_limits(line.steps + line.compile_steps))
        # the legend in words: plotext's own legend box covers the data on a small plot
        plt.xlabel("ms, whole run: median, max per bucket · x compile" if chart.whole
                   else "ms: median, p90 · x compile")
        widget.refresh()

    def _plot_loss(self, tp: ThroughputView) -> None:
        widget = self.query_one("#loss-plot", PlotextPlot)
        widget.display = bool(tp.loss)
        if tp.loss:
            plot_loss(widget, tp.loss, tp.target_loss)


def x_limits(steps: list) -> tuple[float, float]:
    """The step axis: from the first step to the last, at least one step wide (plotext centres a
    single point on -1..1, a step axis that runs into negative steps)."""
    lo, hi = (min(steps), max(steps)) if steps else (0, 1)
    return float(lo), float(hi if hi > lo else lo + 1)


def plot_loss(widget: PlotextPlot, history: Sequence[tuple[int, float]], target: float | None) -> None:
    """Loss against step (core's line, binned to the plot's width), the target as a line."""
    plt = widget.plt
    plt.clear_data()
    plt.clear_figure()
    xs, ys = loss_line(history, max(20, (widget.size.width - 10) * 2))
    if xs:
        plt.plot(xs, ys, color="green", marker="braille")
        plt.xlim(*x_limits(xs))
    if target is not None:
        plt.hline(target, color="orange")
    plt.xlabel("loss" + (f" · target {target:g}" if target is not None else "") + " · against step")
    widget.refresh()
