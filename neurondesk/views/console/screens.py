"""The final summary, the help and the quit confirmation."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Sparkline, Static
from textual_plotext import PlotextPlot

from neurondesk.core.summary.types import Summary, TimeSlice
from neurondesk.core.view.run_view import RunView
from neurondesk.reports import fmt
from neurondesk.reports.safe_text import clean
from neurondesk.reports.summary_writer import summary_rows
from neurondesk.views.console.advice_panels import advice_lines, breakdown_bar, breakdown_legend
from neurondesk.views.console.throughput import plot_loss


def summary_renderables(s: Summary, where: str | None) -> tuple[Table, Table]:
    left = Table.grid(padding=(0, 2), expand=True)
    left.add_column(style="dim", no_wrap=True)
    left.add_column(ratio=1)
    for label, value in summary_rows(s):
        style = ""
        if label == "exit code" and s.exit_code not in (0, None):
            style = "bold red"
        if label == "recompiles after warm-up" and s.recompiles_after_warmup:
            style = "bold red"
        if label == "data wait" and s.input_verdict in ("warn", "input-bound"):
            style = "bold yellow"
        left.add_row(label, Text(value, style=style))
    if where:
        left.add_row("run folder", Text(where, style="cyan"))
    right = Table(title="compiles", title_justify="left", box=None, padding=(0, 1), expand=False)
    for col in ("#", "step", "cause", "location", "duration", "cache"):
        right.add_column(col, no_wrap=True)
    shown = s.compiles[:12]
    for i, c in enumerate(shown, 1):
        late = c.step is not None and c.step >= s.warmup_steps
        right.add_row(str(i), str(c.step), c.cause, fmt.short_location(c.location),
                      fmt.secs(c.duration_s, 2), c.cache or "—", style="bold red" if late else "")
    if len(s.compiles) > len(shown):
        right.add_row("…", "", f"{len(s.compiles) - len(shown)} more", "", "", "")
    return left, right


class BreakdownView(Static):
    """Where the time and the money went: the stacked bar as wide as the widget, and its legend."""

    def __init__(self, slices: list[TimeSlice], **kwargs) -> None:
        super().__init__(**kwargs)
        self.slices = slices

    def render(self) -> Text:
        width = self.content_size.width or 60
        t = Text("where the time went\n", style="dim")
        t.append_text(breakdown_bar(self.slices, width))
        t.append("\n")
        t.append_text(breakdown_legend(self.slices, width))
        return t


class LossPlot(PlotextPlot):
    def __init__(self, history: tuple[tuple[int, float], ...], target: float | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history, self.target = history, target

    def on_resize(self) -> None:
        plot_loss(self, self.history, self.target)


class SummaryScreen(Screen):
    """The run's final summary (core/summary/build.py's, built by the app once the run is done) beside
    the last frame's step times and loss; the console stays here until the user quits."""

    BINDINGS = [
        Binding("escape,b", "app.back", "Panels"),
        Binding("q", "app.request_quit", "Quit"),
        Binding("e", "app.export", "Export"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]

    def __init__(self, summary: Summary, view: RunView, where: str | None, note: str = "") -> None:
        super().__init__(id="summary-screen")
        self.summary = summary
        self.durations = list(view.plain_step_times)
        self.loss_history = view.throughput.loss
        self.target_loss = view.throughput.target_loss
        self.where = where
        self.note = note

    def compose(self) -> ComposeResult:
        s = self.summary
        code = s.exit_code
        title = Text()
        ok = code == 0
        title.append(f" run finished — exit {code if code is not None else '?'} ",
                     style="bold white on blue" if ok else "bold white on red")
        if s.exit_signal:
            title.append(f"  stopped with {s.exit_signal}", style="yellow")
        title.append(f"  {fmt.clock(s.elapsed_s)} · {s.steps:,} steps · {s.compile_count} compiles", style="bold")
        crash = s.crash  # how it died (core/findings/crash.py)
        if crash:
            title.append(clean(f"\ndied ({crash.kind}): {crash.finding}"), style="bold red")
            title.append(clean(f"\ntry: {crash.try_next}"), style="yellow")
        if self.note:
            title.append(f"\n{self.note}", style="dim")
        left, right = summary_renderables(s, self.where)
        with Vertical(id="summary-body"):
            yield Static(title, id="summary-title")
            with VerticalScroll(id="summary-scroll"), Horizontal(id="summary-columns"):
                with Vertical(id="summary-left"):
                    yield Static(left)
                    if s.advice:
                        yield Static(Text("\nwhat to do", style="bold").append_text(
                            Text("\n").append_text(advice_lines(s.advice))), id="summary-advice")
                with Vertical(id="summary-right"):
                    if s.time_breakdown:
                        yield BreakdownView(s.time_breakdown, id="summary-breakdown")
                    if self.loss_history:
                        yield LossPlot(self.loss_history, self.target_loss, id="summary-loss")
                    yield Static(right)
                    if self.durations:
                        yield Static(Text(f"\nstep time of the last {len(self.durations):,} steps "
                                          "that compiled nothing", style="dim"))
                        yield Sparkline(self.durations, id="summary-spark")
                    tail = s.stderr_tail[-8:] if code not in (0, None) else []
                    if tail:
                        yield Static(Text("stderr tail\n" + "\n".join(clean(line) for line in tail), style="red"))
            yield Static(Text("q quit · esc back to the panels (frozen at the end) · e export the summary again",
                              style="dim"), id="summary-hint")
        yield Footer()


HELP = """\
[b]neurondesk console[/b] — every figure comes from the run's events through RunState.

[b]q[/b]  quit (asks first when the workload is still running: stop it, or keep watching);
   attached with `neurondesk attach`: detach, asking only whether to stop the training (default no)
[b]s[/b]  stop the workload: SIGINT, then SIGTERM after 10 s, then SIGKILL after 5 s more
[b]e[/b]  export summary.json and summary.md into the run folder now
[b]c[/b]  compiles table (↑/↓ selects a compile and shows its shapes, guard, frames, graph)
[b]l[/b]  log (type in the search box and press enter to filter; esc clears)
[b]o t d i $[/b]  overview, throughput, devices, input, cost (tabs on small terminals)
[b]r[/b]  ranks (with several ranks: each rank's step time, stragglers, the failed rank)
[b]k[/b]  every rank's Python stacks now (py-spy, or the probe's dump) into the run folder: who stands where
[b]?[/b]  this help   [b]ctrl+p[/b]  command palette

[b]Phases[/b]: starting · compiling #n (live wall timer) · running · input-bound · hung at step n · finished (exit code)
[b]Steady state[/b]: steps ≥ warm-up (default 5) in which nothing compiled; median step time.
[b]Input[/b]: data wait ≥ 5% warns, ≥ 20% of the step is input-bound.
[b]Devices[/b]: NeuronCores (neuron-monitor) or GPUs (NVML) when sampled; the host CPU otherwise.
"""


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(HELP, id="help-text")
            yield Button("Close", id="help-close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.app.pop_screen()


class QuitScreen(ModalScreen[str]):
    """Asked when q is pressed while the workload still runs: 'stop', or None to keep watching."""

    BINDINGS = [Binding("escape,n", "dismiss_none", "Keep watching"), Binding("y,s", "stop", "Stop and quit")]

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-box"):
            yield Static("The workload is still running.\nStop it (SIGINT, then SIGTERM, then SIGKILL) "
                         "and quit when it has exited?", id="quit-text")
            with Horizontal(id="quit-buttons"):
                yield Button("Stop and quit (y)", id="quit-stop", variant="error")
                yield Button("Keep watching (esc)", id="quit-cancel", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss("stop" if event.button.id == "quit-stop" else None)

    def action_stop(self) -> None:
        self.dismiss("stop")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class DetachScreen(ModalScreen[str]):
    """Asked when q is pressed in an attached console: detach ('detach', the default) or stop the
    training too ('stop'); escape keeps watching. The run goes on either way unless asked."""

    BINDINGS = [Binding("n,enter,d", "detach", "Detach"), Binding("y,s", "stop", "Stop the training"),
                Binding("escape", "dismiss_none", "Keep watching")]

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-box"):
            yield Static("Detach from this run? The training goes on, recorded.\n"
                         "Stop the training too? [y/N]", id="quit-text")
            with Horizontal(id="quit-buttons"):
                yield Button("Detach (n)", id="detach", variant="primary")
                yield Button("Stop the training (y)", id="detach-stop", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss("stop" if event.button.id == "detach-stop" else "detach")

    def action_detach(self) -> None:
        self.dismiss("detach")

    def action_stop(self) -> None:
        self.dismiss("stop")

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
