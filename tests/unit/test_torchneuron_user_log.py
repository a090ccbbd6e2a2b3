"""The user's own TORCH_NEURONX_LOG_FILE read as users keep it (issue 53 items 9, 10): a file holding
earlier runs read from where it ended at the run's start, a truncation mid-run said and read again from
its start, a 50 MB line held to 64 KiB, ``/dev/stdout`` and a FIFO never opened, each said in one line.
The recorder's reader (collectors/torchneuron.py) on real files; the FIFO with a real workload is in
test_torchneuron_log_fifo.py."""

from __future__ import annotations

import os
from pathlib import Path

from neurondesk.collectors.output_tail import MAX_LINE
from neurondesk.collectors.torchneuron import NeffLogTail, torchneuron_environment
from neurondesk.core.events.neff_events import NeffCacheLog
from neurondesk.core.events.run_events import Notice


def _miss(key: str) -> bytes:
    return f"[Neuron] [INFO] [neff_cache.cpp:88] [NEFF_CACHE] Cache MISS for key: {key} \n".encode()


def _tail(tmp_path: Path, log: Path, level: str = "2") -> NeffLogTail:
    _, plan = torchneuron_environment({"TORCH_NEURONX_LOG_FILE": str(log), "TORCH_NEURONX_LOG_LEVEL": level},
                                      tmp_path / "run")
    return NeffLogTail(plan, {}, {})


def _misses(events: list) -> int:
    return sum(e.misses for e in events if isinstance(e, NeffCacheLog))


def _notices(events: list) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


def test_a_log_holding_earlier_runs_is_read_from_where_it_ended_at_the_start(tmp_path: Path):
    log = tmp_path / "neuron.log"
    log.write_bytes(b"".join(_miss(f"old{i}") for i in range(5000)))
    tail = _tail(tmp_path, log)
    with open(log, "ab") as f:  # this run's lines
        f.write(_miss("new1") + _miss("new2"))
    events = tail.poll(1.0) + tail.poll(2.0, final=True)
    assert _misses(events) == 2 and _notices(events) == []
    (first,) = [e for e in events if isinstance(e, NeffCacheLog)]
    assert first.miss_ends == [log.stat().st_size - len(_miss("new2")), log.stat().st_size]  # file offsets
    tail.close()


def test_a_log_truncated_mid_run_is_said_once_and_read_again_from_its_start(tmp_path: Path):
    log = tmp_path / "neuron.log"
    log.write_bytes(b"")
    tail = _tail(tmp_path, log)
    log.write_bytes(b"".join(_miss(f"a{i}") for i in range(30)))
    events = tail.poll(1.0)
    os.truncate(log, 0)  # logrotate's copytruncate, or `: > log`
    with open(log, "ab") as f:
        f.write(b"".join(_miss(f"b{i}") for i in range(3)))
    events += tail.poll(2.0) + tail.poll(3.0, final=True)
    assert _misses(events) == 33
    (said,) = _notices(events)
    assert "was truncated while the run went on: reading restarts at its start" in said
    tail.close()


def test_a_50_mb_line_is_held_to_64_kib_and_the_lines_after_it_still_count(tmp_path: Path):
    log = tmp_path / "neuron.log"
    log.write_bytes(b"")
    tail = _tail(tmp_path, log)
    with open(log, "ab") as f:
        f.write(b"[Neuron] [INFO] " + b"x" * (50 << 20))
    held = []
    for i in range(60):  # the reader takes a bounded piece each poll
        tail.poll(float(i))
        held.append(len(tail.files[0].rest))
    assert max(held) <= MAX_LINE and tail.files[0].cut > 0
    with open(log, "ab") as f:
        f.write(b"\n" + _miss("after"))
    assert _misses(tail.poll(100.0, final=True)) == 1
    tail.close()


def test_dev_stdout_as_the_log_gets_one_right_notice_and_is_never_opened(tmp_path: Path):
    _, plan = torchneuron_environment({"TORCH_NEURONX_LOG_FILE": "/dev/stdout", "TORCH_NEURONX_LOG_LEVEL": "2"},
                                      tmp_path / "run")
    assert plan.path is None
    (note,) = plan.notes
    assert "/dev/stdout" in note and "a symbolic link, not a regular file" in note and "does not open it" in note
    tail = NeffLogTail(plan, {}, {})
    assert tail.poll(1.0) == [] and tail.poll(2.0, final=True) == []  # nothing more said: no "never written"


def test_a_fifo_named_as_the_log_is_never_opened(tmp_path: Path):
    fifo = tmp_path / "neuron.fifo"
    os.mkfifo(fifo)
    _, plan = torchneuron_environment({"TORCH_NEURONX_LOG_FILE": str(fifo)}, tmp_path / "run")
    assert plan.path is None and "a FIFO (named pipe), not a regular file" in plan.notes[0]


def test_a_fifo_made_at_the_path_after_the_start_is_said_and_never_opened(tmp_path: Path):
    log = tmp_path / "neuron.log"
    tail = _tail(tmp_path, log)
    os.mkfifo(log)
    events = tail.poll(1.0) + tail.poll(2.0) + tail.poll(3.0, final=True)
    (said,) = _notices(events)
    assert "is a FIFO (named pipe), not a regular file: neurondesk does not open it" in said
    assert tail.files == []
