"""torchrun's failure report -> RankExited (collectors/logparse/torchelastic.py): the rank killed by a signal
is named, with its exit code and signal; the root cause is marked; the ranks reducer takes it as the failure."""

from __future__ import annotations

from conftest import DATA

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState

REPORT = DATA / "torchrun" / "child_failed_sigkill.txt"  # stderr of a real 2-node torchrun, a rank SIGKILLed


def parsed(text: str, t: float = 2e9) -> list[ev.RankExited]:
    p = OutputParser()
    out = [e for line in text.split("\n") for e in p.feed("stderr", line, t)]
    out += p.flush(t)
    return [e for e in out if isinstance(e, ev.RankExited)]


def test_the_root_cause_rank_its_exit_code_and_signal():
    exits = parsed(REPORT.read_text())
    root = [e for e in exits if e.root_cause]
    assert len(root) == 1 and root[0].signal == "SIGKILL" and root[0].exit_code == -9
    assert root[0].pid is not None and root[0].rank >= 0 and root[0].t <= 2e9


def test_the_ranks_reducer_takes_the_root_cause_as_the_failure_unless_the_probe_said_more():
    root = next(e for e in parsed(REPORT.read_text()) if e.root_cause)
    s = RunState()
    s.apply(ev.ProcessAttached(t=1.0, pid=root.pid, rank=root.rank))
    s.apply(root)
    first = s.parts.ranks.failed_first
    assert first.rank == root.rank and first.error.startswith("SIGKILL")
    s2 = RunState()
    s2.apply(ev.ProcessAttached(t=0.4, pid=7, rank=root.rank))
    s2.apply(ev.ProcessFailed(t=0.5, pid=7, error="RuntimeError: boom"))
    s2.apply(root)
    assert len(s2.parts.ranks.failures) == 1  # the probe's own report of that rank is kept, not doubled


def test_a_report_cut_short_or_garbled_yields_nothing_false():
    text = REPORT.read_text()
    cut = text[: text.index("exitcode")]
    assert all(e.exit_code is None for e in parsed(cut) if e.root_cause)
    assert parsed("Root Cause (first observed failure):\n[0]:\n  rank      : lots\n") == []
