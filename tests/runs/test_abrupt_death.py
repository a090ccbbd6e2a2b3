"""A workload that dies without running any exit handler (os._exit, SIGKILL, a real segfault)
right after its steps: nothing silent (issue 24 item 12). The probe's shared-memory step count
(steps-<pid>.count in the run's private folder) outlives it: the summary's steps are the
workload's own count, and steps_lost says how many never reached the recorder; a death by a
signal is recorded as that signal."""

from __future__ import annotations

import os
import sys

import pytest
from conftest import DATA, neurondesk_run

from neurondesk.collectors.probe_lifelines import death_signal, read_step_counts
from neurondesk.collectors.probe_messages import ProbeDecoder
from neurondesk.core.events import run_events as ev

pytest.importorskip("torch")
DIES = DATA / "workloads" / "dies_abruptly.py"


@pytest.mark.parametrize(("how", "code", "signal_name"), [("os-exit", 3, None), ("sigkill", -9, "SIGKILL"),
                                                          ("segfault", -11, "SIGSEGV")])
def test_a_workload_that_dies_abruptly_loses_no_step_untold(tmp_path, how, code, signal_name):
    run = neurondesk_run(tmp_path, [how], workload=DIES, timeout=300)
    assert "dies_abruptly steps: 2" in (run.run_dir / "stdout.log").read_text()
    s = run.summary
    assert s["exit_code"] == code and s["exit_signal"] == signal_name
    received = [e for e in run.events if e["kind"] == "step"]
    assert s["steps"] == 2  # the workload's own count, whatever reached the recorder
    assert len(received) + s["steps_lost"] == 2  # what did not arrive is said lost
    notices = [e["message"] for e in run.events if e["kind"] == "notice" and "never reached the recorder" in e["message"]]
    assert len(notices) == (1 if s["steps_lost"] else 0)


def test_the_step_count_of_a_process_is_read_back_and_the_gap_said_once(tmp_path):
    folder = str(tmp_path)
    sys.path.insert(0, str(DATA.parent.parent / "neurondesk" / "probe" / "bootstrap"))
    try:
        from _neurondesk_probe import lifelines
    finally:
        sys.path.pop(0)
    counter = lifelines.step_counter(folder, 4321)
    counter[1] = 7
    (open(os.path.join(folder, "steps-99.count"), "wb")).write(b"not a count file")
    assert read_step_counts(folder) == {4321: 7}
    decoder = ProbeDecoder()
    line = b'{"kind":"steps","t":5.0,"pid":4321,"step":0,"ts":[4.0,5.0],"duration_s":[0.1,0.1],"data_wait_s":[0,0]}\n'
    decoder.decode(line, 6.0)
    decoder.decode(b'{"kind":"probe_dropped","t":5.5,"pid":4321,"dropped":3,"dropped_steps":2,"steps":4}\n', 6.0)
    lost, notice = decoder.unsent(read_step_counts(folder), 9.0)
    assert lost == ev.ProbeDropped(t=9.0, pid=4321, dropped=6, dropped_steps=5, steps=7)  # 7 - 2 received - 2 told
    assert isinstance(notice, ev.Notice) and "3 of which never reached the recorder" in notice.message
    counter[1] = 4
    assert decoder.unsent(read_step_counts(folder), 9.0) == []  # every step is accounted for


def test_the_signal_of_a_death_by_its_wait_status():
    assert (death_signal(-11), death_signal(-9), death_signal(0), death_signal(1), death_signal(None)) == (
        "SIGSEGV", "SIGKILL", None, None, None)
