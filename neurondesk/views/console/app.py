"""The console app. It polls its source (a live RunSession or a ReplaySource) four times a second,
on one interval timer (a poll never overlaps the next: a late one is skipped), and redraws the
visible panels once a second (and at once when the phase changes), however many events arrived
in between; a poll that brought nothing new only reads the journal's tail. A poll reads the run's
pulse (core/view/pulse.py); a frame builds one RunView (core/view/run_view.py) that the header and
every visible panel render. Wide terminals show every panel; small ones fold them into tabs. When
the run ends, the final summary stays up until the user quits."""

from __future__ import annotations

import asyncio
import signal
import sys

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container
from textual.widgets import DataTable, Footer, Input, Tab, Tabs

from neurondesk.core.summary.build import run_summary
from neurondesk.core.view.pulse import Pulse, pulse
from neurondesk.core.view.run_view import RunView, build_view
from neurondesk.reports.safe_text import clean
from neurondesk.views.console.compiles import CompilesPanel
from neurondesk.views.console.cost import CostPanel
from neurondesk.views.console.devices import DevicesPanel
from neurondesk.views.console.header import HeaderBar
from neurondesk.views.console.inputs import InputPanel
from neurondesk.views.console.job_line import JobLine
from neurondesk.views.console.log import LogPanel, LogView
from neurondesk.views.console.on_demand import read_stacks, ring_alerts
from neurondesk.views.console.overview import OverviewPanel
from neurondesk.views.console.panel import Panel
from neurondesk.views.console.ranks import RanksPanel
from neurondesk.views.console.screens import DetachScreen, HelpScreen, QuitScreen, SummaryScreen
from neurondesk.views.console.throughput import ThroughputPanel
from neurondesk.views.terminal_notify import AlertBell

POLL_S = 0.25
RENDER_EVERY = 4  # polls per render: events are taken in 4x a second, the screen redrawn once
# (a redraw repaints nearly the whole screen; twice a second cost 3.5% of a core, benchmarks/watch_cost.py)
TABBED_BELOW = (120, 36)  # narrower or shorter than this: one panel at a time, in tabs
PANELS = {"overview": OverviewPanel, "compiles": CompilesPanel, "throughput": ThroughputPanel,
          "devices": DevicesPanel, "log": LogPanel, "input": InputPanel, "cost": CostPanel,
          "ranks": RanksPanel}  # ranks: shown (grid row, tab) once a second rank reports a step


# The console's keys (docs/console.md lists them)
KEYS = [
    Binding("q", "request_quit", "Quit"),
    Binding("ctrl+c", "request_quit", "Quit", show=False, priority=True),
    Binding("s", "stop", "Stop"),
    Binding("e", "export", "Export"),
    Binding("c", "panel('compiles')", "Compiles"),
    Binding("l", "panel('log')", "Log"),
    Binding("question_mark", "help", "Help", key_display="?"),
    Binding("o", "panel('overview')", "Overview", show=False),
    Binding("t", "panel('throughput')", "Throughput", show=False),
    Binding("d", "panel('devices')", "Devices", show=False),
    Binding("i", "panel('input')", "Input", show=False),
    Binding("dollar_sign", "panel('cost')", "Cost", show=False),
    Binding("r", "panel('ranks')", "Ranks", show=False),
    Binding("slash", "search", "Search log", show=False),
    Binding("f", "summary", "Summary", show=False),
    Binding("k", "stacks", "Stacks", show=False),
]


class ConsoleApp(App[int]):
    CSS_PATH = "console.tcss"
    TITLE = "neurondesk"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = KEYS

    def __init__(self, source, *, frozen: bool = False, poll_s: float = POLL_S, job_lines=None) -> None:
        """``job_lines``: (read, Prometheus URL) of `--prometheus`: the job's lines under the header."""
        super().__init__()
        self.source, self.job_lines = source, job_lines
        self.frozen = frozen  # snapshots: no cursor blink; the replay's clock is already fixed
        self.poll_s = poll_s
        self.tabbed = False
        self.active = "overview"
        self.summary_shown = False
        self.quit_when_done = False
        self.polls = 0
        self.frames = 0
        self._panels: list[Panel] | None = None
        self._phase = ""
        self._polled_events = -1  # state.event_count at the last poll
        self.view: RunView | None = None  # the last frame's
        self.multi_rank = False  # more than one rank reports steps: the Ranks panel and tab show

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield HeaderBar(getattr(self.source, "label", ""), id="header")
        if self.job_lines is not None:
            yield JobLine(*self.job_lines, id="job-line")
        yield Tabs(*(Tab(cls.NAME, id=f"tab-{name}") for name, cls in PANELS.items()), id="tabs")
        with Container(id="panels"):
            for name, cls in PANELS.items():
                yield cls(id=name)
        yield Footer()

    def on_mount(self) -> None:
        if self.frozen:
            self.query_one("#log-search", Input).cursor_blink = False
        self.query_one(Tabs).hide("tab-ranks")
        self._layout_for(self.size.width, self.size.height)
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        self.call_after_refresh(self.poll_now)  # the first frame, once widgets know their sizes
        self.set_interval(self.poll_s, self._tick)  # one timer: a new Timer (and task) per poll cost more

    def on_unmount(self) -> None:
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def on_resize(self, event) -> None:
        self._layout_for(event.size.width, event.size.height)
        self.call_after_refresh(self.poll_now)  # texts are fitted to widths: render them again

    def _layout_for(self, width: int, height: int) -> None:
        tabbed = width < TABBED_BELOW[0] or height < TABBED_BELOW[1]
        self.tabbed = tabbed
        self.set_class(tabbed, "-tabbed")
        for panel in self.query(Panel):
            panel.invalidate()
        self._show_active()

    def _show_active(self) -> None:
        for panel in self.query(Panel):
            panel.set_class(panel.id == self.active, "-active")

    def visible_panels(self) -> list[Panel]:
        if self._panels is None:
            self._panels = list(self.query(Panel))
        if self.tabbed:
            return [p for p in self._panels if p.id == self.active]
        return [p for p in self._panels if p.id != "overview" and (p.id != "ranks" or self.multi_rank)]

    def _show_ranks(self, multi: bool) -> None:
        """A second rank reported a step: the Ranks panel takes a grid row (and a tab); once a
        job has many ranks it keeps them, so this happens at most once a run."""
        self.multi_rank = multi
        self.set_class(multi, "-ranks")
        tabs = self.query_one(Tabs)
        (tabs.show if multi else tabs.hide)("tab-ranks")
        for panel in self.query(Panel):
            panel.invalidate()

    # ------------------------------------------------------------------ polling
    async def _tick(self) -> None:
        if not self.screen_stack or self.return_code is not None:
            return  # the app is closing
        self.poll_now(force=False)

    def poll_now(self, force: bool = True) -> None:
        """Take in what arrived, then render the visible panels once (every RENDER_EVERY polls,
        or at once when the phase changed: a compile that starts shows up without delay)."""
        self.polls += 1
        try:
            self.source.poll()
        except Exception as exc:  # noqa: BLE001 - a bad event must not take the console down
            self.notify(clean(f"could not take in events: {exc}"), severity="error")
        state = self.source.state
        due = force or self.polls % RENDER_EVERY == 0
        fresh = state.event_count != self._polled_events  # nothing new: the phase moves only with time
        self._polled_events = state.event_count
        at: Pulse | None = None
        if due or fresh:
            at = pulse(state, self.source.now())
            ring_alerts(self, at.alerts)  # --notify (run_console gives the app an alert_bell)
            if (at.world > 1) != self.multi_rank:
                self._show_ranks(not self.multi_rank)
            due = due or at.phase != self._phase
            self._phase = at.phase
        headers = self.query(HeaderBar)  # none: the app is being torn down, a tick came after its widgets
        if at is not None and due and headers and not isinstance(self.screen, SummaryScreen):
            self.frames += 1
            frame = 0 if force else self.frames
            view = self.view = build_view(state, at, self.view)  # one view for the whole frame
            headers.first().render_view(view)
            for panel in self.visible_panels():
                panel.update_view(view, frame)
        if self.source.done:
            if self.quit_when_done:
                self.exit(0)
            elif not self.summary_shown:
                self.summary_shown = True
                if isinstance(self.screen, QuitScreen | DetachScreen):
                    self.pop_screen()  # asked while the run was ending: the question is moot now
                self.action_summary()

    # ------------------------------------------------------------------ actions
    action_stacks = read_stacks  # k: every rank's Python stacks, and who stands where (on_demand.py)
    def action_panel(self, name: str) -> None:
        if name == "ranks" and not self.multi_rank:
            self.notify("one process: the Ranks panel shows once a job has more than one rank")
            return
        if isinstance(self.screen, SummaryScreen | HelpScreen):
            self.pop_screen()
        if self.tabbed or name == "overview":
            self.query_one(Tabs).active = f"tab-{name}"
        self.active = name if (self.tabbed or name != "overview") else self.active
        focus = {"compiles": DataTable, "log": LogView}.get(name)
        if focus is not None:
            self.query_one(f"#{name}").query_one(focus).focus()

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        name = event.tab.id.removeprefix("tab-")
        if name == self.active and self.query_one(f"#{name}", Panel).has_class("-active"):
            return
        self.active = name
        self._show_active()
        panel = self.query_one(f"#{name}", Panel)
        panel.invalidate()
        panel.update_view(self.frame_view())

    def frame_view(self) -> RunView:
        """A view of the run as it is now, for what is drawn between two frames (a tab shown, a search)."""
        state = self.source.state
        self.view = build_view(state, pulse(state, self.source.now()), self.view)
        return self.view

    def action_search(self) -> None:
        self.action_panel("log")
        self.query_one("#log-search", Input).focus()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_back(self) -> None:
        """From the summary (or help) back to the panels, drawn afresh."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        self.call_after_refresh(self.poll_now)

    def action_summary(self) -> None:
        if not self.source.done:
            self.notify("the summary comes up when the run has finished; e exports one now")
            return
        if isinstance(self.screen, SummaryScreen):
            return
        run_dir = getattr(self.source, "run_dir", None) if self.source.live else None
        where = str(run_dir) if run_dir is not None else None
        note = "" if self.source.live else getattr(self.source, "label", "")
        view = self.frame_view()
        self.push_screen(SummaryScreen(run_summary(self.source.state, view.now), view, where, note))

    def action_stop(self) -> None:
        if not self.source.live:
            self.notify(self.source.stop())
            return
        self.notify(self.source.stop(), title="stop")

    def action_export(self) -> None:
        try:
            path = self.source.export_summary()
        except OSError as exc:
            self.notify(clean(f"export failed: {exc}"), severity="error")
            return
        self.notify(clean(f"summary written: {path}"), title="export")

    def action_request_quit(self) -> None:
        if self.source.live and not self.source.done and getattr(self.source, "attached", False):
            if not isinstance(self.screen, DetachScreen):
                self.push_screen(DetachScreen(), self._detach_answer)
            return
        if self.source.live and not self.source.done:
            if self.quit_when_done:
                self.notify("waiting for the workload to exit (SIGTERM after 10 s, SIGKILL 5 s later)")
                return
            if isinstance(self.screen, QuitScreen):
                return
            self.push_screen(QuitScreen(), self._quit_answer)
            return
        self.exit(0)

    async def action_quit(self) -> None:  # the palette's "Quit" goes through the same question
        self.action_request_quit()

    def _on_sigterm(self) -> None:
        """Terminated from outside: an attached console detaches; the console of `run` stops the
        workload (if it runs) and quits once it has exited."""
        if self.source.live and not self.source.done and not getattr(self.source, "attached", False):
            if not self.quit_when_done:
                self.quit_when_done = True
                self.source.stop()
            return
        self.exit(0)

    def _detach_answer(self, answer: str | None) -> None:
        if answer == "stop":
            self.notify(self.source.stop(), title="stop")
        if answer in ("stop", "detach"):
            self.exit(0)

    def _quit_answer(self, answer: str | None) -> None:
        if answer == "stop":
            self.quit_when_done = True
            self.notify(self.source.stop(), title="stop and quit")

    def get_system_commands(self, screen):
        yield SystemCommand("Quit", "Quit (asks first while the workload runs)", self.action_request_quit)
        yield SystemCommand("Stop the workload", "SIGINT, then SIGTERM, then SIGKILL", self.action_stop)
        yield SystemCommand("Export the summary", "Write summary.json and summary.md now", self.action_export)
        for name, cls in PANELS.items():
            yield SystemCommand(f"Show {cls.NAME}", f"key {cls.KEY}", lambda n=name: self.action_panel(n))
        yield SystemCommand("Search the log", "key /", self.action_search)
        yield SystemCommand("Final summary", "key f, once the run has finished", self.action_summary)
        yield SystemCommand("Help", "key ?", self.action_help)
        yield from (c for c in super().get_system_commands(screen) if c.title not in ("Quit the application",))


def run_console(source, notify: bool = False, job_lines=None) -> int:
    """Open the console on a live run's source (the recorder already owns the run). On the way
    out of a `run` console, wait for the recorder to finish its summary, then print it. Returns
    the workload's exit status (1 when it is not known: detached, or the recorder was lost)."""
    from neurondesk.reports.summary_writer import to_text_table
    from neurondesk.views.headless import fallback_message

    again = f"`neurondesk attach {source.run_dir.name}` to watch it again"
    try:
        app = ConsoleApp(source, job_lines=job_lines)
        app.alert_bell = AlertBell() if notify else None
        app.run()
    except Exception as exc:  # noqa: BLE001 - the console's failure is not the run's
        sys.stderr.write(f"neurondesk: the console failed ({type(exc).__name__}: {exc}); the run goes on, "
                         f"recorded: {again}\n")
        return 1
    if not source.done:
        if getattr(source, "attached", False):
            sys.stdout.write(f"neurondesk: detached from {source.run_dir}; the run goes on ({again})\n")
            return 0
        sys.stderr.write(f"neurondesk: the console closed while the run goes on, recorded: {again}\n")
        return 1
    source.finish()
    sys.stdout.write(f"neurondesk summary ({source.run_dir})\n")
    sys.stdout.write(to_text_table(run_summary(source.state)))
    if getattr(source, "fallback", None):
        sys.stderr.write(f"neurondesk: {fallback_message(source)}\n")
    code = source.state.exit_code
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def run_replay(source) -> int:
    ConsoleApp(source).run()
    for p in source.problems[:5]:
        sys.stderr.write(f"neurondesk: {source.run_dir}/events.jsonl line {p.line}: {p.error} (skipped)\n")
    return 0
