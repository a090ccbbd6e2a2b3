"""Neuron outputs as pasted from trn1 / trn1n / trn2 / inf2 machines (issue 10): shapes the
documented formats do not show. Each test reads its own fixture in tests/data/neuron/."""

from __future__ import annotations

from conftest import FIXTURES

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events import CompileFinished, LogError, OutputLine


def feed_fixture(name: str, step: float = 0.01):
    """Every line of the fixture, ``step`` seconds apart; the parser's events, then its flush."""
    lines = (FIXTURES / name).read_text().splitlines()
    p = OutputParser()
    events = []
    for i, line in enumerate(lines):
        events += p.feed("stderr", line, 100.0 + i * step)
    events += p.flush(100.0 + len(lines) * step)
    assert p.problems == 0
    return lines, events


def tagged(events) -> dict[str, str | None]:
    return {e.text: e.tag for e in events if isinstance(e, OutputLine)}


def errors(events) -> list[LogError]:
    return [e for e in events if isinstance(e, LogError) and not e.continues]


def compiles(events) -> list[CompileFinished]:
    return [e for e in events if isinstance(e, CompileFinished)]


# ---------------------------------------------------------------- 1. padded pid:tid


def test_padded_pid_runtime_lines_are_errors():
    lines, events = feed_fixture("runtime-padded-pid-container.log", step=5.0)
    tags = tagged(events)
    assert [tags[ln] for ln in lines] == [None, "error", "error", None]
    oom, busy = errors(events)
    assert oom.code == "device-oom" and oom.pid == 87
    assert oom.message == "TDRV:dmem_alloc_internal Failed to alloc DEVICE memory: 2097152"
    assert busy.code == "cores-busy" and busy.pid == 112
