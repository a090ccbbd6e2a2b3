"""Issue 24 item 5: every file neurondesk reads is opened only when it is a regular file, and read
only up to a bound; anything else is one line, never a hang or gigabytes of memory.

Real files of every kind: a real FIFO (mkfifo: an open for reading blocks until a writer comes,
so a reader that opens it without care hangs until the subprocess timeout), a real symlink to
/dev/zero (endless, no newline), a real oversized file; real `neurondesk` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from conftest import REPO, base_env

from neurondesk.store import journal, journal_tail
from neurondesk.store.input_files import InputRefused, read_regular
from neurondesk.store.journal import iter_journal
from neurondesk.store.journal_tail import READ_CHUNK, JournalTail
from neurondesk.store.liveness import read_recorder_info

ND = [sys.executable, "-m", "neurondesk.cli"]
HANG = 120  # far beyond what each command takes; reaching it is the failure (a hang)


def _nd(tmp: Path, *args: str, timeout: float = HANG) -> subprocess.CompletedProcess:
    return subprocess.run([*ND, *args], capture_output=True, text=True, env=base_env(tmp), cwd=REPO,
                          timeout=timeout)


def _plant(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        raise AssertionError(kind)


def _config_prices(tmp: Path) -> Path:
    return tmp / "user" / "config" / "neurondesk" / "prices.json"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_prices_list_with_a_price_table_that_is_a_fifo_or_dev_zero_says_so_in_one_line(tmp_path, kind):
    _plant(_config_prices(tmp_path), kind)
    p = _nd(tmp_path, "prices", "list")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "ignored local price table" in lines[0], p.stderr
    assert ("a FIFO" if kind == "fifo" else "a character device") in lines[0]
    assert "trn1.2xlarge" in p.stdout and "(ignored: see above)" in p.stdout


def test_a_run_with_its_price_table_linked_to_dev_zero_runs_priced_from_the_bundled_table(tmp_path):
    _plant(_config_prices(tmp_path), "dev-zero")
    p = _nd(tmp_path, "run", "--headless", "--instance-type", "trn1.2xlarge", "--run-dir", str(tmp_path / "run"),
            "--", sys.executable, "-c", "print('done')")
    assert p.returncode == 0, p.stderr
    assert "done" in p.stdout
    assert "ignored local price table" in p.stderr and "a character device" in p.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cost"]["price_per_hour"] > 0 and summary["cost"]["price_source"].startswith("bundled table")


def test_an_oversized_price_table_is_ignored_without_being_read_whole(tmp_path):
    path = _config_prices(tmp_path)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MiB of zeros
    p = _nd(tmp_path, "prices", "list")
    assert p.returncode == 0 and "larger than 16 MiB, not read" in p.stderr, p.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_devices_from_file_on_a_fifo_or_dev_zero_is_one_line_exit_2(tmp_path, kind):
    _plant(tmp_path / "saved.txt", kind)
    p = _nd(tmp_path, "devices", "--from-file", str(tmp_path / "saved.txt"))
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a regular file" in lines[0] and "saved.txt" in lines[0], p.stderr


def test_summary_of_a_run_whose_journal_is_a_fifo_is_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    _plant(run / "events.jsonl", "fifo")
    p = _nd(tmp_path, "summary", str(run))
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "a FIFO" in lines[0] and "events.jsonl" in lines[0], p.stderr


def test_reindex_skips_a_summary_that_is_a_fifo_and_lint_skips_a_fifo_script(tmp_path):
    run = tmp_path / "runs" / "20260101-000000-abcd"
    run.mkdir(parents=True, mode=0o700)
    _plant(run / "summary.json", "fifo")
    p = _nd(tmp_path, "reindex")
    assert p.returncode in (0, 1), p.stderr  # whatever it says about a folder with nothing else, it says it
    _plant(tmp_path / "train.py", "fifo")
    p = _nd(tmp_path, "lint", str(tmp_path / "train.py"))
    assert "not a regular file" in p.stderr + p.stdout, p.stderr + p.stdout


def test_recorder_info_planted_as_a_fifo_reads_as_none(tmp_path):
    _plant(tmp_path / "recorder.json", "fifo")
    assert read_recorder_info(tmp_path) is None


def test_read_regular_follows_a_link_to_a_regular_file_and_bounds_it(tmp_path):
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert read_regular(tmp_path / "link.json", "a table", 16) == b"{}"
    with pytest.raises(InputRefused, match="symbolic|ELOOP|levels"):
        read_regular(tmp_path / "link.json", "a table", 16, follow=False)
    (tmp_path / "big").write_bytes(b"x" * 17)
    with pytest.raises(InputRefused, match="larger than"):
        read_regular(tmp_path / "big", "a table", 16)


def _journal_with_a_huge_line(path: Path, size: int) -> None:
    event = b'{"kind":"notice","t":1.0,"level":"info","message":"m"}\n'
    with open(path, "wb") as f:
        f.write(event)
        f.write(b"x" * size + b"\n")  # one line far over MAX_LINE
        f.write(event)


def test_a_journal_line_over_the_bound_is_skipped_and_never_held(tmp_path, monkeypatch):
    limit = 1 << 20  # the bound lowered for the test: a 24 MiB line is then 24 times over it
    monkeypatch.setattr(journal, "MAX_LINE", limit)
    monkeypatch.setattr(journal_tail, "MAX_LINE", limit)
    path = tmp_path / "events.jsonl"
    _journal_with_a_huge_line(path, 24 * limit)
    problems: list = []
    tracemalloc.start()
    try:
        events = list(iter_journal(path, problems))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(events) == 2
    assert len(problems) == 1 and problems[0].line == 2 and "skipped" in problems[0].error
    assert peak < 4 * limit, f"held {peak:,} bytes for a line of {24 * limit:,}"

    tail = JournalTail(path)
    tracemalloc.start()
    try:
        got = []
        for _ in range(20):
            got += tail.read_new()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        tail.close()
    assert len(got) == 2 and tail.problem_count == 1
    assert peak < 4 * limit + 2 * READ_CHUNK, f"the tail held {peak:,} bytes for a line of {24 * limit:,}"


def test_bounded_lines_refuses_a_line_over_the_bound_even_when_it_fits_one_piece():
    """Found by benchmarks/fuzz.py (bounded_lines): a line over the bound but under the 1 MiB read
    piece was given whole."""
    import io

    from neurondesk.store.input_files import bounded_lines

    data = b"x" * 20 + b"\n" + b"0123456789\n" + b"y" * 11
    got = list(bounded_lines(io.BufferedReader(io.BytesIO(data)), 10))
    assert got == [(b"", 21), (b"0123456789\n", 0), (b"", 11)]


def test_run_records_with_absurd_numbers_or_nesting_read_as_unusable(tmp_path):
    """Found by benchmarks/fuzz.py (run_records): Infinity, 1e308 and deep nesting escaped."""
    from neurondesk.store.fallback import FallbackError, read_fallback_info

    for text in ('{"pid": 1, "control_socket": "s", "workload_pid": Infinity}',
                 '{"pid": 1e308, "control_socket": "s"}', '{"pid": ' + "[" * 100000 + "]" * 100000 + "}"):
        (tmp_path / "recorder.json").write_text(text)
        assert read_recorder_info(tmp_path) is None
    (tmp_path / "fallback.json").write_text('{"run_id": "r", "run_dir": "/r", "journal_bytes_in_run_dir": Infinity}')
    with pytest.raises(FallbackError):
        read_fallback_info(tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_neuron_monitor_replay_that_is_a_fifo_or_dev_zero_is_refused_in_one_line(tmp_path, kind):
    """--neuron-monitor-replay FILE is played by replay_stream (standard library only): a FIFO hung
    its open, /dev/zero its readlines()."""
    _plant(tmp_path / "stream.jsonl", kind)
    p = subprocess.run([sys.executable, "-m", "neurondesk.collectors.devices.replay_stream", str(tmp_path / "stream.jsonl"),
                        "--delay", "0"], capture_output=True, text=True, cwd=REPO, timeout=HANG)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a regular file" in lines[0], p.stderr
