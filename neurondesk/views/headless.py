"""Headless view: the workload's own output passes through, one status line on stderr, the
summary table on stdout at the end. It renders RunState; it computes nothing itself."""

from __future__ import annotations

import signal
import sys
import time

from neurondesk.collectors.workload import RawOutput
from neurondesk.core.state import RunState
from neurondesk.session import RunSession
from neurondesk.views import fmt
from neurondesk.views.summary_writer import to_text_table

STATUS_EVERY_S = 0.5
PLAIN_STATUS_EVERY_S = 10.0  # when stderr is not a terminal, a plain line now and then


def status_line(state: RunState, now: float) -> str:
    _, words = state.phase(now)
    step = f"step {state.steps_done}" + (f"/{state.steps_requested}" if state.steps_requested else "")
    parts = [f"neurondesk: {words}", step]
    sps = state.steady_samples_per_s
    parts.append(f"{sps:,.1f} samples/s steady" if sps is not None else "steady: not yet")
    if state.compiles:
        parts.append(f"{len(state.compiles)} compiles ({state.compile_total_s:.1f} s)")
    if state.price_per_hour is not None:
        parts.append(f"${state.price_per_hour / 3600 * state.elapsed_s(now):,.4f} so far")
    parts.append(fmt.clock(state.elapsed_s(now)))
    return " | ".join(parts)


class HeadlessPrinter:
    def __init__(self, session: RunSession, out=None, err=None) -> None:
        self.session = session
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.tty = self.err.isatty()
        self.status_shown = False
        self.interrupts = 0

    def _clear_status(self) -> None:
        if self.status_shown:
            self.err.write("\r\x1b[K")
            self.status_shown = False

    def _show_status(self, now: float) -> None:
        line = status_line(self.session.state, now)
        if self.tty:
            self.err.write("\r\x1b[K" + line[: 200])
            self.status_shown = True
        else:
            self.err.write(line + "\n")
        self.err.flush()

    def _on_signal(self, signum, frame) -> None:
        # First Ctrl-C: pass it on (the workload may save and exit); then SIGTERM, then SIGKILL.
        self.interrupts += 1
        sig = (signum, signal.SIGTERM, signal.SIGKILL)[min(self.interrupts - 1, 2)]
        self.session.forward_signal(sig)

    def run(self) -> int:
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.session.start()
            last_status = 0.0
            every = STATUS_EVERY_S if self.tty else PLAIN_STATUS_EVERY_S
            while not self.session.done:
                self._pump_and_echo()
                now = time.time()
                if now - last_status >= every:
                    self._show_status(now)
                    last_status = now
        except BaseException as exc:
            if self.session.paths is not None:  # started: never leave an orphaned workload behind
                self.session.abort(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        self._clear_status()
        if not self.tty:
            self._show_status(time.time())  # a log keeps the final status line too
        summary = self.session.summary()
        self.out.write(f"\nneurondesk summary ({self.session.paths.dir})\n")
        self.out.write(to_text_table(summary))
        for note in summary["notices"]:
            self.err.write(f"neurondesk: {note}\n")
        self.out.flush()
        code = self.session.exit_code
        if code is None:
            return 1
        return 128 - code if code < 0 else code

    def _pump_and_echo(self) -> None:
        # Echo output lines as they are handled, so they interleave with the status line cleanly.
        session = self.session
        item = None
        try:
            item = session.queue.get(timeout=0.1)
        except Exception:  # noqa: BLE001 - queue.Empty
            return
        items = [item]
        while len(items) < 5000:
            try:
                items.append(session.queue.get_nowait())
            except Exception:  # noqa: BLE001
                break
        echoed = False
        for it in items:
            if isinstance(it, RawOutput):
                if not echoed:
                    self._clear_status()
                    echoed = True
                (self.out if it.stream == "stdout" else self.err).write(it.text + "\n")
            session.handle(it)
        session.after_batch()
        if echoed:
            self.out.flush()
            self.err.flush()
