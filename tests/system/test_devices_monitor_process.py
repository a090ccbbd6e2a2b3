"""NeuronMonitorProcess and the replay script, with real subprocesses: reading, death, restart
with backoff, stop, the default neuron-monitor command (a fake binary), and a missing binary."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from conftest import FIXTURES

from neurondesk.collectors.devices.neuron_monitor import (
    NOT_FOUND,
    NeuronMonitorProcess,
    generate_config,
    replay_command,
)
from neurondesk.core.events.device_events import NeuronSample
from neurondesk.core.events.run_events import Notice, ParseProblem

STREAM = FIXTURES / "neuron-monitor-trn1.jsonl"


class Recorder:
    def __init__(self) -> None:
        self.events: list = []
        self.times: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, event) -> None:
        with self._lock:
            self.events.append(event)
            self.times.append(time.monotonic())

    def of(self, cls) -> list:
        with self._lock:
            return [e for e in self.events if isinstance(e, cls)]

    def wait_for(self, cond, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < end, f"timed out; events so far: {self.events}"
            time.sleep(0.02)


def test_replay_script_prints_lines_exactly_and_dies_on_request(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"one\n\xff two\nthree")  # last line without newline
    out = subprocess.run(
        [sys.executable, "-m", "neurondesk.collectors.devices.replay_stream", str(src), "--delay", "0"],
        capture_output=True, check=False, timeout=30,
    )  # fmt: skip
    assert (out.returncode, out.stdout) == (0, b"one\n\xff two\nthree\n")
    died = subprocess.run(
        [*replay_command(src, delay=0, exit_after=2)[:-2], "--exit-after", "2", "--exit-code", "7"],
        capture_output=True, check=False, timeout=30,
    )  # fmt: skip
    assert (died.returncode, died.stdout) == (7, b"one\n\xff two\n")


def test_reads_a_replayed_stream_into_samples_in_order() -> None:
    rec = Recorder()
    mon = NeuronMonitorProcess(rec, replay_command(STREAM, delay=0.01), restart_on_clean_exit=False)
    assert mon.start() is None
    try:
        assert mon.supervisor.join(20)
    finally:
        mon.stop()
    samples = rec.of(NeuronSample)
    assert [s.raw for s in samples] == STREAM.read_text().splitlines()
    assert [s.t for s in samples] == sorted(s.t for s in samples)
    assert (mon.lines, mon.samples, mon.problems) == (10, 10, 0)
    # report 9's group error (rank 1 exited) is said once, then the stream's end
    assert [(n.level, n.message, n.source) for n in rec.of(Notice)] == [
        ("warn", "runtime 41873 neuron_runtime_vcpu_usage: open /proc/41873/stat: no such file or directory",
         "neuron-monitor"),
        ("info", "neuron-monitor stream ended", "neuron-monitor"),
    ]


def test_garbage_lines_in_the_stream_are_counted_and_the_stream_goes_on(tmp_path: Path) -> None:
    good = STREAM.read_bytes().splitlines()
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b"\n".join([good[0], good[3][:500], b"\xff\xfe\xfd", b"", good[4]]) + b"\n")
    rec = Recorder()
    mon = NeuronMonitorProcess(rec, replay_command(src, delay=0), restart_on_clean_exit=False)
    mon.start()
    assert mon.supervisor.join(20)
    mon.stop()
    kinds = [type(e).__name__ for e in rec.events if not isinstance(e, Notice)]
    assert kinds == ["NeuronSample", "ParseProblem", "ParseProblem", "NeuronSample"]
    assert (mon.lines, mon.samples, mon.problems) == (5, 2, 2)
    assert rec.of(ParseProblem)[0].raw == good[3][:500].decode()


def test_death_restarts_with_exponential_backoff_then_gives_up() -> None:
    rec = Recorder()
    mon = NeuronMonitorProcess(
        rec,
        replay_command(STREAM, delay=0, exit_after=2),  # each run prints 2 reports then exits 1
        backoff_initial=0.1,
        backoff_max=0.4,
        max_restarts=3,
    )
    mon.start()
    assert mon.supervisor.join(30)
    mon.stop()
    notices = rec.of(Notice)
    assert [n.level for n in notices] == ["warn", "warn", "warn", "error"]
    assert [n.message for n in notices[:3]] == [
        f"neuron-monitor exited with status 1; restarting in {d} s" for d in ("0.1", "0.2", "0.4")
    ]
    assert notices[3].message == "neuron-monitor exited with status 1; gave up after 3 restarts"
    assert len(rec.of(NeuronSample)) == 8 and mon.supervisor.starts == 4
    # the waits really happened: from each restart notice to the next run's first sample
    idx = {id(e): i for i, e in enumerate(rec.events)}
    for n, delay in zip(notices[:3], (0.1, 0.2, 0.4), strict=True):
        i = idx[id(n)]
        nxt = next(j for j in range(i + 1, len(rec.events)) if isinstance(rec.events[j], NeuronSample))
        assert rec.times[nxt] - rec.times[i] >= delay * 0.9


def test_stop_ends_the_child_and_no_restart_follows() -> None:
    rec = Recorder()
    mon = NeuronMonitorProcess(rec, replay_command(STREAM, delay=30), backoff_initial=0.05)
    mon.start()
    rec.wait_for(lambda: rec.of(NeuronSample))
    pid = mon.supervisor.pid
    assert pid is not None and psutil.pid_exists(pid)
    mon.stop()
    # the supervising thread has ended (stop joins it): nothing is left that could restart the child
    assert mon.supervisor.join(60)
    # the child was ended, not waited for: it would print its next report 30 s later
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert len(rec.of(NeuronSample)) == 1
    assert rec.of(Notice) == [] and mon.supervisor.starts == 1


def test_default_command_runs_neuron_monitor_with_the_generated_config(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "seen-config.json"
    first = STREAM.read_text().splitlines()[0]
    fake = bin_dir / "neuron-monitor"
    fake.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] || exit 9\ncp "$2" "{seen}"\necho \'{first}\'\n')
    fake.chmod(0o755)
    rec = Recorder()
    mon = NeuronMonitorProcess(
        rec, tag_filter="^neurondesk-r1$", search_path=str(bin_dir), restart_on_clean_exit=False
    )
    assert mon.start() is None
    assert mon.supervisor.join(20)
    mon.stop()
    assert json.loads(seen.read_text()) == generate_config("^neurondesk-r1$")
    assert [s.raw for s in rec.of(NeuronSample)] == [first]


def test_missing_neuron_monitor_is_a_notice_and_a_reason(tmp_path: Path) -> None:
    rec = Recorder()
    mon = NeuronMonitorProcess(rec, search_path=str(tmp_path), bin_dir=str(tmp_path / "none"))
    assert mon.start() == NOT_FOUND
    assert [(n.level, n.message) for n in rec.of(Notice)] == [("warn", NOT_FOUND)]
    mon.stop()  # harmless when never started


def test_command_that_cannot_start_is_retried_then_given_up(tmp_path: Path) -> None:
    rec = Recorder()
    mon = NeuronMonitorProcess(rec, [str(tmp_path / "no-such-binary")], backoff_initial=0.01, max_restarts=1)
    mon.start()
    assert mon.supervisor.join(10)
    msgs = [n.message for n in rec.of(Notice)]
    assert msgs[0].startswith("neuron-monitor could not be started (No such file or directory)")
    assert msgs[-1].endswith("gave up after 1 restarts") and len(msgs) == 2


def test_a_failing_consumer_does_not_kill_the_reader() -> None:
    got = []

    def flaky(event) -> None:
        got.append(event)
        if len(got) == 1:
            raise RuntimeError("consumer bug")

    mon = NeuronMonitorProcess(flaky, replay_command(STREAM, delay=0), restart_on_clean_exit=False)
    mon.start()
    assert mon.supervisor.join(20)
    mon.stop()
    assert mon.samples == 10 and mon.supervisor.callback_errors == 1
    assert "consumer bug" in mon.supervisor.last_callback_error
