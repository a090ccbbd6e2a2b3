"""Headless view: the workload's own output passes through, one status line on stderr, the
summary table on stdout at the end. The status line renders the RunView of its moment
(core/view/run_view.py: core's figures among it); it computes nothing itself, and runs no lint: a
caller that wants lint's line for a creeping memory passes ``locate_memory`` in."""

from __future__ import annotations

import re
import signal
import sys
import time
from collections.abc import Callable

from neurondesk.core.figures.phases import short_verdict
from neurondesk.core.figures.run_figures import FIGURES
from neurondesk.core.findings.memory_creep import MemoryCreep
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.types import Summary
from neurondesk.core.view.pulse import alerts_of
from neurondesk.core.view.run_view import RunView, view_of
from neurondesk.reports import fmt
from neurondesk.reports.goodput_text import goodput_lines
from neurondesk.reports.safe_text import clean, clean_lines
from neurondesk.reports.summary_writer import to_text_table
from neurondesk.views.terminal_notify import AlertBell, notification

STATUS_EVERY_S = 0.5
PLAIN_STATUS_EVERY_S = 10.0  # when stderr is not a terminal, a plain line now and then
FIRST_STATUS_S = 2.0
OPEN_LINE_STALE_S = 3.0  # a workload line left open (a tqdm bar) this long: the status line goes below it
POLL_S = 0.1  # how often the journal is read when nothing new came (the recorder writes every 0.1 s)
FINISH_QUIET_S = 1.0  # the recorder's end (summary, index row) this long unsaid; past it, what it finishes is said
FINISHING = "finishing"  # the source of the recorder's notice naming the sinks it finishes (recorder/sink_desk.py)
LocateMemory = Callable[[MemoryCreep], MemoryCreep]  # lint.locate.located_memory: a summary's memory_creep with
# the line where lint finds the list a creeping rank appends its tensors to

# A workload line that would pass for one of neurondesk's own ("neurondesk: finished | ... samples/s"):
# "neurondesk" at the start of a line (after LF or CR), past any blanks and escape sequences (an
# unended OSC is taken to the line's end at most: the text after a CR is a line of its own).
_OWN_WORD = re.compile(
    rb"(?:\A|(?<=[\n\r]))((?:\x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]|\x1b\][^\x07\x1b\r\n]*(?:\x07|\x1b\\)?"
    rb"|\x1b[\x20-\x2f]*[\x30-\x7e]|[ \t])*+)(?=neurondesk)", re.IGNORECASE)  # *+: no backtracking (ReDoS)
WORKLOAD_MARK = b"[workload] "


def mark_impersonation(data: bytes, at_line_start: bool = True) -> bytes:
    """The workload's bytes unchanged, except that a line starting with "neurondesk" (after blanks
    and escape sequences) gets WORKLOAD_MARK in front of that word: neurondesk's status and summary
    lines are the only ones that start so. ``at_line_start``: the previous chunk ended a line."""
    if b"neurondesk" not in data.lower():
        return data

    def mark(m: re.Match) -> bytes:
        if m.start() == 0 and not at_line_start:
            return m.group(0)
        return m.group(1) + WORKLOAD_MARK
    return _OWN_WORD.sub(mark, data)


def finishing_words(state: RunState) -> str:
    """"workload exited 0; finishing: TensorBoard, MLflow": the workload ended, the recorder still writes
    (the sinks it named in its last "finishing" notice, else the summary)."""
    what = next((n.message for n in reversed(state.notices) if n.source == FINISHING), "the summary")
    ended = f"ended ({state.exit_signal})" if state.exit_signal else f"exited {state.exit_code}"
    return f"workload {ended}; finishing: {what}"


def status_line(view: RunView, phase_words: str | None = None) -> str:
    """``phase_words``: in place of the phase's (finishing_words, while the recorder finishes)."""
    f = view.figures
    step = f"step {f.steps}" + (f"/{f.steps_requested}" if f.steps_requested else "")
    parts = [f"neurondesk: {phase_words or view.pulse.phase_words}", step]
    if f.crash is not None:  # how it died (core/findings/crash.py); the finding whole is among the final lines
        # while the run goes on, a launcher may still restart it (torchrun --max-restarts): "failed", not "died"
        said = "died" if view.finished else "failed"
        parts.insert(1, f"{said}: {f.crash.kind}" + (f" (rank {f.crash.rank})" if f.crash.rank is not None else ""))
    g = f.goodput
    if g is not None and g.restarts:  # attempts, not ranks (core/figures/goodput.py)
        parts.insert(1, f"{g.restarts} restart{'s' if g.restarts != 1 else ''}, {g.steps_lost:,} steps lost")
    sps = f.samples_per_s
    parts.append(f"{fmt.rate(sps)} samples/s steady" if sps is not None else "steady: not yet")
    parts += [f"{fmt.value_text(getattr(f, info.name), info.kind)} {info.label}" for info in FIGURES
              if info.status and getattr(f, info.name) is not None]  # core's figures for this line
    if f.compile_count:
        took = "seconds unknown" if f.compile_total_s is None else f"{f.compile_total_s:.1f} s"
        parts.append(f"{f.compile_count} compiles ({took})")
    if f.total_usd is not None:
        parts.append(f"${f.total_usd:,.4f} so far")
    if f.checkpoint_last is not None:  # the last good checkpoint (core/figures/checkpoint_figures.py)
        parts.append(f"last checkpoint {f.checkpoint_last}")
    compared = view.ranks.comparison  # the ranks compared a moment ago (core/view/ranks_view.py)
    if compared is not None and compared.stragglers:
        parts.append(f"straggler: {compared.stragglers[0].words()}")
    verdict = short_verdict(f.step_phases) if f.step_phases is not None else None
    if verdict:  # what bounds the steady step (core/figures/phases.py); its words whole are among the final lines
        parts.append(verdict)
    if f.memory_creep is not None:  # a trend over the steady steps (core/findings/memory_creep.py)
        parts.append(f.memory_creep.short)
    parts += view.disk_status  # a disk that fills soon, output not stored
    if view.devices.compile_wall is not None:  # a compile wall emptying host memory (core/node/compile_wall.py)
        parts.append(view.devices.compile_wall.short)
    parts.append(fmt.clock(f.elapsed_s))
    return " | ".join(parts)


def rank_lines(summary: Summary, tail: int = 8) -> list[str]:
    """The end of a many-rank run in words: the rank that failed first with the last lines of its
    traceback, and the stragglers."""
    lines = []
    f = summary.failed_rank
    if f:
        who = f"rank {f.rank}" if f.rank is not None else "a process"
        at = f", at step {f.step}" if f.step is not None else ""
        lines.append(f"{who} (pid {f.pid}) failed first{at}: {f.error}")
        lines += [f"  {x}" for x in f.traceback[-tail:]]
    lines += [f"straggler: {s.words}" for s in summary.stragglers]
    return lines


class HeadlessPrinter:
    """Follows a live run's source (see neurondesk.sources.follow): passes the workload's own
    output bytes through unchanged (an attached printer from where the run is now), keeps one status line, prints the summary at the end. Ctrl-C and
    SIGTERM are passed on to the workload through the recorder (SIGINT, then SIGTERM, then
    SIGKILL); closing the terminal only ends this printer: the recorder keeps the run."""

    def __init__(self, source, out=None, err=None, echo: bool = True, notify: bool = False,
                 locate_memory: LocateMemory | None = None) -> None:
        """``locate_memory``: lint.locate.located_memory, to say at the end where lint finds the list
        a creeping rank appends its tensors to (None: the creep is said without it)."""
        self.source = source
        self.locate_memory = locate_memory
        self.bell = AlertBell() if notify else None  # --notify: each alert rings the terminal
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.echo = echo
        self.tty = self.err.isatty()
        self.status_shown = False
        self.interrupts = 0
        self.attached = bool(getattr(source, "attached", False))
        self.detached = False
        self.at_line_start = True  # the workload's output ends a line: a status line may go below it
        self.last_output = 0.0  # when the workload's output last came (time.time())
        self._view: RunView | None = None  # the last status line's (its costly sections are kept a while)

    def _clear_status(self) -> None:
        if self.status_shown:
            self.err.write("\r\x1b[K")
            self.status_shown = False

    def _show_status(self, now: float, finishing: bool = False) -> None:
        self._view = view_of(self.source.state, now, self._view)
        line = clean(status_line(self._view, finishing_words(self.source.state) if finishing else None))
        if not self.at_line_start:  # below the workload's open line (a bar), never glued onto it
            self.err.write("\n")
            self.at_line_start = True
        if self.tty:
            self.err.write("\r\x1b[K" + line[: 200])
            self.status_shown = True
        else:
            self.err.write(line + "\n")
        self.err.flush()

    def _ring(self) -> None:
        """Each new alert: one line (and on a terminal the bell and a desktop notification)."""
        if self.bell is None:
            return
        for message in self.bell.new_alerts(alerts_of(self.source.state)):
            self._clear_status()
            if not self.at_line_start:
                self.err.write("\n")
                self.at_line_start = True
            self.err.write(f"neurondesk: alert: {clean(message)}\n" + (notification(message) if self.tty else ""))
            self.err.flush()

    def _on_signal(self, signum, frame) -> None:
        if self.attached:  # Ctrl-C in an attached printer detaches; the run goes on
            self.detached = True
            return
        # First Ctrl-C: pass it on (the workload may save and exit); then SIGTERM, then SIGKILL.
        self.interrupts += 1
        sig = (signal.Signals(signum).name, "SIGTERM", "SIGKILL")[min(self.interrupts - 1, 2)]
        self.source.send_signal(sig)

    def run(self, handle_signals: bool = True) -> int:
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if handle_signals else {}
        try:
            opened = time.time()
            last_status = 0.0
            every = STATUS_EVERY_S if self.tty else PLAIN_STATUS_EVERY_S
            while not self.source.done:
                if self.detached:
                    self._clear_status()
                    self.err.write(clean(f"neurondesk: detached from {self.source.run_dir}; the run goes on") + "\n")
                    return 0
                self._poll_and_echo()
                self._ring()
                if self.source.done:  # the final status line is _final's: once
                    break
                now = time.time()
                # the first line once the workload is seen (or after a moment): a failed start prints none
                seen = self.source.state.processes or self.source.state.output_total or now - opened >= FIRST_STATUS_S
                # never over a progress bar the workload is drawing in place; below one left open
                open_stale = not self.at_line_start and now - self.last_output >= OPEN_LINE_STALE_S
                if seen and now - last_status >= every and (self.at_line_start or open_stale or not self.tty):
                    self._show_status(self._now())
                    last_status = now
                if not self.source.new_events:
                    time.sleep(POLL_S)
            if not self.source.finish(timeout_s=FINISH_QUIET_S):  # the sinks take their time: say so, not "running"
                self._show_status(self._now(), finishing=True)
                self.source.finish()
            while self._poll_and_echo():  # to the end of the output: 1 MiB a stream at a time
                pass
            self._ring()
            return self._final()  # still ours: a Ctrl-C while the summary prints is no traceback
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _final(self) -> int:
        self._clear_status()
        state = self.source.state
        if start_failed(state):
            return 127  # the command line says why, in one line
        if not self.tty:
            self._show_status(self._now())  # a log keeps the final status line too
        final = getattr(self.source, "final_summary", None)  # the journal lacks the end: the recorder's own
        summary = self.source.summary()  # the recorder's (summary.json); the view computes none
        # what neurondesk prints is made safe (colours kept): commands, notices and tails hold outside text
        self.out.write(clean_lines(f"\nneurondesk summary ({self.source.run_dir})\n" + to_text_table(summary)))
        said = [d.message + (f" (at {d.location})" if d.location else "") for d in summary.diagnostics]
        crash = summary.crash  # how it died (core/findings/crash.py): first, before the details
        said = ([f"died ({crash.kind}): {crash.finding}", f"try: {crash.try_next}"] if crash else []) + said
        phases = summary.step_phases
        said += [phases.words] if phases is not None and phases.words else []  # the verdict with its next step to try
        creep = summary.memory_creep
        if creep is not None and self.locate_memory is not None:  # with the line where lint finds the list, if it can
            creep = self.locate_memory(creep)
        said += ([creep.words] if creep else []) + goodput_lines(summary) + rank_lines(summary) + list(summary.notices)
        if self.source.recorder_lost:
            said.append(recorder_lost_message(self.source))
        if getattr(self.source, "fallback", None):
            said.append(fallback_message(self.source))
        if final is not None:
            said.append(f"the journal could not be written to its end (its disk full, and the fallback's too): the "
                        f"summary above is the one the recorder wrote at the end (summary.json in "
                        f"{self.source.run_dir}); `neurondesk summary` of the folder rebuilds only what the journal holds")
        for line in said:
            self.err.write(f"neurondesk: {clean(line, sgr=True)}\n")
        self.out.flush()
        self.err.flush()
        code = state.exit_code if final is None else final.exit_code
        if not isinstance(code, int):
            return 1
        return 128 - code if code < 0 else code

    def _now(self) -> float:
        """The source's clock (a lost recorder's run stops at its last recorded time)."""
        now = getattr(self.source, "now", None)
        return now() if now is not None else time.time()

    def _poll_and_echo(self) -> bool:
        """Take in the journal, then pass the workload's own bytes through unchanged (a tqdm bar's
        carriage returns and escape sequences included, so it updates in place), but for a line
        that would pass for neurondesk's own: it is marked (mark_impersonation)."""
        self.source.poll()
        if not self.echo:
            return False
        chunks = self.source.new_output()
        if not chunks:
            return False
        self._clear_status()
        for stream, data in chunks:
            data = mark_impersonation(data, self.at_line_start)
            target = self.out if stream == "stdout" else self.err
            buffer = getattr(target, "buffer", None)
            if buffer is not None:
                target.flush()
                buffer.write(data)
            else:
                target.write(data.decode("utf-8", "replace"))
            target.flush()
            self.at_line_start = data.endswith(b"\n")
        self.last_output = time.time()
        return True


def start_failed(state: RunState) -> bool:
    """The workload never started (no such program): nothing ran, so there is nothing to sum up."""
    return state.finished and state.exit_code == 127 and not state.processes and not state.output_total


def recorder_lost_message(source) -> str:
    state = source.state
    when = time.strftime("%H:%M:%S", time.localtime(state.last_t)) if state.last_t else "its start"
    pid = source.workload_pid
    return (f"the recorder of {source.run_dir} stopped at {when} before the workload ended; what came after "
            f"is not recorded (steps, compiles, the exit). The workload (pid {pid if pid else '?'}) may still "
            f"run: its output goes on into {source.run_dir}/stdout.log and stderr.log")


def fallback_message(source) -> str:
    # the cause (a full disk, a permission, a read-only filesystem) is in the notice said before
    return (f"{source.run_dir} could not be written to the end (the notice above says why): the rest of the "
            f"journal and a copy of the summary are in {source.fallback}; rebuild the whole run with "
            f"`neurondesk summary {source.fallback}`, and fix that before the next run")
