"""Metrics from a viewer's own RunState (`attach`, `replay`), and the headless replay loop.

The viewer's poll loop is the thread that reduces into ``source.state``; the exporter publishes a
snapshot from the source's ``after_poll`` hook (sources/follow.py, sources/replay.py), right after a
poll applied its events, so the HTTP server's threads never read the RunState itself (see
exporter/snapshot.py).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any, TextIO

from neurondesk.exporter.endpoint import MetricsExporter

STATUS_EVERY_S = 5.0


class PollPublisher:
    """A source's ``after_poll`` hook: a snapshot of its state for the exporter (a replay's on the live clock)."""

    def __init__(self, source: Any, exporter: MetricsExporter) -> None:
        self.source, self.exporter = source, exporter

    def __call__(self) -> None:
        source = self.source
        live = None if getattr(source, "live", True) else time.time()
        self.exporter.publish(source.state, source.now(), live_now=live)


def publish_on_poll(source: Any, exporter: MetricsExporter) -> None:
    """Publish after each of ``source``'s polls: its hook, never a replaced method."""
    source.after_poll.append(PollPublisher(source, exporter))


def run_headless_replay(source: Any, exporter: MetricsExporter | None, out: TextIO,
                        stop: threading.Event | None = None) -> int:
    """Play the replay with a status line every few seconds; with an exporter, keep serving the
    final figures after the end until SIGINT/SIGTERM (so a scraper sees them)."""
    stop = stop or threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: stop.set())
    if exporter is not None:
        publish_on_poll(source, exporter)
        out.write(f"neurondesk: serving metrics on http://{exporter.addr}/metrics\n")
        out.flush()
    said = float("-inf")
    while not stop.is_set():
        source.poll()
        mono = time.monotonic()
        if mono - said >= STATUS_EVERY_S or source.done:
            said = mono
            phase, words = source.state.phase(source.now())
            out.write(f"{source.label}: step {source.state.steps_done} · {words}\n")
            out.flush()
        if source.done:
            break
        stop.wait(0.1)
    if exporter is not None:
        exporter.publish(source.state, source.now(), force=True, live_now=time.time())
        if not stop.is_set():
            out.write("neurondesk: replay finished; serving its final figures until interrupted\n")
            out.flush()
        stop.wait()
        exporter.close()
    return 0
