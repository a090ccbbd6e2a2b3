"""Issue 24 item 6: a workload line with no newline is bounded before it is buffered (the first
64 KiB kept, the rest counted), and a `\\r` progress bar that never prints a newline keeps what a
terminal shows of it, its last segment.

A real run: the workload writes a 24 MiB line in 1 MiB writes, then a line, then 20,000 tqdm-like
redraws with no newline at all before it exits. Before the fix this gave 24 output events of
1 MiB and as many parse problems."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REAL_RUN_TIMEOUT_S, REPO, base_env

from neurondesk.collectors.output_tail import MAX_LINE, REDRAW_MAX, OutputTail, cut_mark

BIG = 24 << 20
BAR_STEPS = 20000
WORKLOAD = f"""
import sys
w = sys.stdout.write
for _ in range({BIG >> 20}):
    w("x" * (1 << 20)); sys.stdout.flush()
w("\\n"); print("after the long line", flush=True)
for i in range(1, {BAR_STEPS} + 1):
    w(f"\\r{{100 * i / {BAR_STEPS}:5.1f}}%|##########| {{i}}/{BAR_STEPS} [00:10<00:00, 1999.9it/s]")
sys.stdout.flush()
"""


def test_a_24_mib_line_and_a_bar_without_newline_are_one_bounded_event_each(tmp_path):
    run_dir = tmp_path / "run"
    with open(tmp_path / "passthrough", "wb") as out:
        p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                            "--", sys.executable, "-c", WORKLOAD], stdout=out, stderr=subprocess.PIPE,
                           env=base_env(tmp_path), cwd=REPO, timeout=REAL_RUN_TIMEOUT_S)
    assert p.returncode == 0, p.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    # the workload's bytes reach stdout.log (and the terminal) unchanged: the bound is neurondesk's reading only.
    # A disk that does not keep up (a loaded CI machine) may cost bytes, never the workload's write: each is counted
    stored = (run_dir / "stdout.log").stat().st_size
    lost = 0
    if summary["disk"]["output_not_stored"] is not None:
        stream = summary["disk"]["output_not_stored"]["streams"].get("stdout")
        lost = stream["lost_bytes"] + stream["pending_bytes"] if stream else 0
        assert stream is None or stream["reason"] == "the disk did not keep up", stream
    written = BIG + len("\nafter the long line\n") + sum(
        len(f"\r{100 * i / BAR_STEPS:5.1f}%|##########| {i}/{BAR_STEPS} [00:10<00:00, 1999.9it/s]")
        for i in range(1, BAR_STEPS + 1))
    assert stored + lost == written, (stored, lost, written)
    assert lost < BIG // 2  # on a quiet disk nothing at all (0 here; about 4 MiB in one loaded CI run)
    assert (tmp_path / "passthrough").stat().st_size > stored  # what was stored, then the summary
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    outputs = [e["text"] for e in events if e["kind"] == "output" and e.get("stream") == "stdout"]
    assert len(outputs) == 3, [o[:80] for o in outputs]
    long_line, after, bar = outputs
    # the bytes dropped went from the middle of that line (the oldest held): they are never read as output
    assert long_line in {"x" * MAX_LINE + cut_mark(BIG - lost_in_line - MAX_LINE) for lost_in_line in {0, lost}}
    assert after == "after the long line"
    last = f"100.0%|##########| {BAR_STEPS}/{BAR_STEPS} [00:10<00:00, 1999.9it/s]"
    assert bar.endswith(" more bytes of this line cut by neurondesk]\r" + last)  # the head, the mark, what a terminal shows
    assert len(bar) < MAX_LINE + 200
    problems = [e for e in events if e["kind"] == "parse_problem"]
    assert len(problems) <= 1, problems  # the long line's "only the first 16384 characters parsed", once
    assert (run_dir / "events.jsonl").stat().st_size < 1 << 20
    assert summary["script_throughput"]["value"] == 1999.9  # read from the bar's last redraw


def test_the_tail_keeps_the_head_counts_the_rest_and_the_last_redraw(tmp_path):
    path = tmp_path / "stdout.log"
    tail = OutputTail(path, "stdout")
    with open(path, "wb") as f:
        f.write(b"a" * (MAX_LINE - 10))
        f.flush()
        assert tail.read_lines() == []  # no newline yet: held (under the bound)
        f.write(b"b" * 100 + b"\rfirst" + b"c" * (3 * REDRAW_MAX) + b"\rlast one\r\n")
        f.write(b"short\r\n")
        f.flush()
        lines = tail.read_lines()
    cut = 90 + len(b"\rfirst") + 3 * REDRAW_MAX + len(b"\rlast one\r")
    # a CRLF line: its cut part ends with the "\r" of "\r\n", so no redraw segment follows the mark
    assert lines == ["a" * (MAX_LINE - 10) + "b" * 10 + cut_mark(cut), "short"]
    with open(path, "ab") as f:
        f.write(b"z" * (2 * MAX_LINE) + b"\r 50%" + b"\r 99%|####|")
    lines = tail.read_lines(final=True)
    assert lines == ["z" * MAX_LINE + cut_mark(MAX_LINE + 16) + "\r 99%|####|"]
    tail.close()


def test_the_kept_output_lines_are_bounded_in_characters_too():
    """5,000 lines of 64 KiB (each within its own bound) were all kept: 320 MB in the recorder, every
    viewer and each checkpoint. The reducer keeps the latest lines up to its character budget."""
    from neurondesk.core.events.run_events import OutputLine
    from neurondesk.core.reduce.log import OUTPUT_KEEP_CHARS
    from neurondesk.core.reduce.state import RunState

    state = RunState()
    for i in range(5000):
        state.apply(OutputLine(t=float(i), stream="stdout", text=f"{i:05d}" + "x" * (MAX_LINE - 5)))
    kept = list(state.output)
    assert state.output_total == 5000
    assert sum(len(e.text) for e in kept) <= OUTPUT_KEEP_CHARS
    assert kept[-1].text.startswith("04999") and len(kept) == OUTPUT_KEEP_CHARS // MAX_LINE
    for i in range(6000):  # short lines: the line count is the bound again
        state.apply(OutputLine(t=6000.0 + i, stream="stdout", text=f"short {i}"))
    assert len(state.output) == 5000 and state.output[-1].text == "short 5999"


def test_a_tail_follows_an_output_file_made_again_within_its_check_interval(tmp_path):
    """The relay makes a removed stdout.log again: the tail reads the new file from its start
    (the path is checked at most every REPLACED_CHECK_S while it polls, and always at the end)."""
    import time

    from neurondesk.collectors.output_tail import REPLACED_CHECK_S

    path = tmp_path / "stdout.log"
    path.write_bytes(b"one\n")
    tail = OutputTail(path, "stdout")
    assert tail.read_lines() == ["one"]
    path.unlink()
    path.write_bytes(b"two\n")
    got, deadline = [], time.monotonic() + 10 * REPLACED_CHECK_S
    while not got and time.monotonic() < deadline:
        got = tail.read_lines()
        time.sleep(0.05)
    assert got == ["two"]
    path.unlink()
    path.write_bytes(b"three")  # no newline: the last words at the end of the run
    assert tail.read_lines(final=True) == ["three"]
    tail.close()


def test_the_run_waits_for_a_relay_still_storing_output_after_the_exit(tmp_path):
    """After the workload's exit the recorder waits for the relay while its files still grow (a
    busy machine storing megabytes written just before the exit), and only `quiet_s` once they
    stop: the last output is read, not left out of the journal."""
    import threading
    import time

    from neurondesk.collectors.workload import wait_for_relay

    path, done = tmp_path / "stdout.log", threading.Event()
    path.write_bytes(b"")

    def store() -> None:  # a relay that takes 1.5 s to store what is left, then stays silent
        for _ in range(15):
            with open(path, "ab") as f:
                f.write(b"x" * 1000)
            time.sleep(0.1)

    writer = threading.Thread(target=store)
    started = time.monotonic()
    writer.start()
    assert wait_for_relay(done, [path], quiet_s=0.5, most_s=30) is False
    waited = time.monotonic() - started
    writer.join()
    assert path.stat().st_size == 15000 and waited >= 1.5  # it waited past the last write
    done.set()
    started = time.monotonic()
    assert wait_for_relay(done, [path], quiet_s=5, most_s=30) is True and time.monotonic() - started < 1
