"""Telemetry sources behind one interface (collectors/telemetry_source.py): a source is a SourceSpec
(name, period, open); the runner gives each its own thread, emits what it polls, and turns a
failure into one notice while the others go on. Real threads, the real Telemetry runner."""

from __future__ import annotations

import os
import queue
import time

import pytest

from neurondesk.collectors import telemetry as tm
from neurondesk.collectors.telemetry_source import Poller, SourceContext, SourceSpec
from neurondesk.core.events.run_events import Notice


def notices_from(spec: SourceSpec, seconds: float = 1.5, **telemetry_args) -> list[Notice]:
    events: queue.SimpleQueue = queue.SimpleQueue()
    t = tm.Telemetry(lambda e: e is not None and events.put(e), env={}, **telemetry_args)
    t.sources = (spec, tm.builtin.HOST)  # the new source beside a real one
    t.start(os.getpid())
    seen = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                seen.append(events.get(timeout=0.2))
            except queue.Empty:
                pass
    finally:
        t.stop()
    assert any(e.kind == "host_sample" for e in seen), "the other source stopped"
    return [e for e in seen if isinstance(e, Notice)]


def test_a_new_source_is_one_spec_polled_on_its_own_thread_with_what_it_opened_on() -> None:
    opened: list[SourceContext] = []
    closed: list[bool] = []

    def open_(ctx: SourceContext) -> Poller:
        opened.append(ctx)
        return Poller(lambda: [Notice(t=time.time(), level="info", source="loadavg",
                                      message=open("/proc/loadavg").read().split()[0])],
                      close=lambda: closed.append(True))
    got = notices_from(SourceSpec("loadavg", 0.2, open_), run_dir="/tmp")
    assert [n.source for n in got].count("loadavg") >= 3
    assert opened[0].root_pid == os.getpid() and str(opened[0].run_dir) == "/tmp"
    assert closed == [True]  # closed when the telemetry stopped


def test_a_source_absent_on_this_run_starts_no_thread_and_says_nothing() -> None:
    got = notices_from(SourceSpec("absent", 0.1, lambda ctx: None))
    assert got == []


@pytest.mark.slow  # seconds of waiting: make test runs it, make test-fast does not
def test_a_source_that_fails_says_so_once_and_the_others_go_on() -> None:
    calls = []

    def poll():
        calls.append(1)
        raise OSError("the device went away")
    got = notices_from(SourceSpec("flaky", 0.1, lambda ctx: Poller(poll)))
    said = [n.message for n in got if "flaky" in n.message]
    assert said == ["flaky telemetry stopped: OSError('the device went away')"]
    assert len(calls) == 1  # a failed source is not polled again
    broken = notices_from(SourceSpec("broken", 0.1, lambda ctx: 1 / 0))
    assert [n.message for n in broken] == ["broken telemetry stopped: ZeroDivisionError('division by zero')"]
