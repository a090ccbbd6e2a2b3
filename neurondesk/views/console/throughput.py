"""Throughput: step time and samples/s against step (plotext), compile steps marked, the steady
value and the rule that decided it, tokens/s, and the script's own throughput figure beside it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual_plotext import PlotextPlot

from neurondesk.core.state import RunState
from neurondesk.views import fmt
from neurondesk.views.console.derived import binned, step_series
from neurondesk.views.console.panel import Line, Panel, kv
from neurondesk.views.summary_writer import script_rate_text

REPLOT_FRAMES = 6  # the chart is the costly part: redrawn every 6th frame, 3 s (the figures: every 2nd)


class ThroughputPanel(Panel):
    EVERY = 2
    NAME = "Throughput"
    KEY = "t"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._frame = 0
        self._plotted_steps = -1

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="throughput-plot")
        yield Line(id="throughput-text")

    def invalidate(self) -> None:
        super().invalidate()
        self._plotted_steps = -1

    def update_view(self, state: RunState, now: float, frame: int = 0) -> None:
        self._frame = frame
        super().update_view(state, now, frame)

    def render_state(self, state: RunState, now: float) -> None:
        self._text(state)
        due = self._frame % REPLOT_FRAMES == 0 or self._plotted_steps < 0 or state.finished
        if state.steps_done != self._plotted_steps and due:
            self._plot(state)
            self._plotted_steps = state.steps_done

    def _text(self, state: RunState) -> None:
        t = kv(("steady", f"{fmt.ms(state.steady_step_time_s)}/step"),
               ("p90", fmt.ms(state.steady_step_time_p90_s)),
               ("samples/s", fmt.num(state.steady_samples_per_s)),
               ("tokens/s", fmt.num(state.steady_tokens_per_s, 0)))
        t.append("\n")
        if state.steady_from is None:
            rule = f"steady: not yet (needs a step ≥ {state.warmup_steps} with no compile in it)"
        else:
            rule = (f"steady: median of {len(state.steady_times):,} steps from step {state.steady_from} "
                    f"(step ≥ {state.warmup_steps}, no compile)")
        t.append(rule, style="dim")
        self._script_rate(t, state)
        if state.steps_lost:  # the step count is right (the probe's own counter); these steps are not charted
            t.append("\n" + state.steps_lost_text, style="yellow")
        self.query_one("#throughput-text", Line).show(t)

    @staticmethod
    def _script_rate(t: Text, state: RunState) -> None:
        """The script's own figure beside the steady one; yellow when they differ by more than 10%."""
        rate = state.script_throughput()
        if rate is not None:
            t.append("\nscript's own: ", style="dim")
            t.append(script_rate_text(rate.as_dict()), style="yellow" if rate.off else "")

    def _plot(self, state: RunState) -> None:
        widget = self.query_one("#throughput-plot", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        s = step_series(state)
        if not s.steps:
            plt.title("step time — waiting for the first step")
            widget.refresh()
            return
        # one dot per cell: binned to what the plot can show (plotext's lines cost ~10x more
        # than dots, and this chart is redrawn while the run goes on)
        bins = max(20, widget.size.width - 10)
        plt.scatter(*binned(s.steps, s.step_ms, bins), color="cyan", marker="dot")
        rx, ry = binned(s.steps, s.samples_per_s, bins)
        if rx:
            plt.scatter(rx, ry, color="green", marker="dot", yside="right")
        for step in s.compile_steps[-40:]:
            plt.vline(step, color="red")
        if state.steady_step_time_s is not None:
            plt.hline(state.steady_step_time_s * 1000, color="orange")
            # compile steps take seconds: keep the steady band readable, the red lines mark them
            top = (state.steady_step_time_p90_s or state.steady_step_time_s) * 1000 * 3
            if max(s.step_ms) > top:  # the plot's y range, on the raw step times
                plt.ylim(0, top, yside="left")
        # the legend in words: plotext's own legend box covers the data on a small plot
        plt.xlabel("step · cyan: step ms (left) · green: samples/s (right) · red: compiled · orange: steady")
        widget.refresh()
