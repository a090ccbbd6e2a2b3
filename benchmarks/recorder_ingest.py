"""How many probe events per second the recorder ingests on one core.

Feeds N realistic probe step lines (the bytes the probe sends: its own key order, the pid it
adds last, XLA fields, a shapes list) through the recorder's hot path in one thread:

    decode_probe_line (decode + validate)  ->  JournalWriter.write (a real file)  ->  RunState.apply

and reports events/s for the whole path, then each stage alone (same lines, fresh objects) so a
regression points at its stage. The journal flushes on its own 1 s rule and is closed (fsync) at
the end, inside the timed region. Pinned to one CPU when the OS allows it. Best of --rounds.

    .venv/bin/python benchmarks/recorder_ingest.py [--events 200000] [--rounds 3]

Writes benchmarks/results/recorder_ingest.json (goal: >= 100,000 events/s end to end), with the
figures measured before the codec change for comparison. The stage figures are each stage alone;
the decode stage does not keep its events (keeping 200,000 would time the garbage collector).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from neurondesk.collectors.probe_messages import decode_probe_line  # noqa: E402
from neurondesk.core.reduce.state import RunState  # noqa: E402
from neurondesk.store.journal import JournalWriter, encode_event  # noqa: E402

GOAL = 100_000
# The same benchmark on commit 221e9b6 (before the msgspec codec): json.loads + dataclass(**d) to
# decode, json.dumps(dataclasses.asdict(e)) to journal, the one-class RunState to reduce.
BEFORE = {"commit": "221e9b6", "events_per_s": 23975,
          "us_per_event": {"end_to_end": 41.711, "decode": 14.708, "encode": 23.921, "journal_write": 24.463,
                           "reduce": 1.884}}
PID = 48211


def probe_lines(n: int, t0: float = 1_800_000_000.0) -> list[bytes]:
    """What the probe writes on its socket: a hello, the device, then one line per step, built the
    way the probe builds them (json.dumps of its dict, pid appended by send())."""
    hello = {"kind": "process_attached", "t": t0, "pid": PID, "ppid": PID - 9, "rank": None,
             "python": "/home/u/venv/bin/python", "argv": ["train.py", "--steps", str(n)],
             "torch_version": "2.9.0", "torch_xla_version": "2.9.0"}
    device = {"kind": "device_seen", "device_kind": "xla-cpu", "device_name": "xla:0 (CPU)",
              "precision": "fp32", "t": t0 + 0.5, "pid": PID}
    out = [json.dumps(hello, separators=(",", ":")), json.dumps(device, separators=(",", ":"))]
    t = t0 + 1.0
    for i in range(n):
        d = 0.0213 + (i % 17) * 1e-4
        t += d
        msg = {"kind": "step", "t": t, "step": i, "duration_s": d, "data_wait_s": 0.000411 + (i % 5) * 1e-6,
               "compiles": 1 if i in (0, 1) else 0, "samples": 32, "tokens": 4096,
               "input_shapes": [[32, 128]], "executions": 1, "pid": PID}
        out.append(json.dumps(msg, separators=(",", ":")))
    return [(line + "\n").encode() for line in out]


def _pin() -> str:
    try:
        cpu = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def end_to_end(lines: list[bytes], folder: str) -> tuple[float, RunState]:
    path = os.path.join(folder, "events.jsonl")
    if os.path.exists(path):
        os.unlink(path)
    state = RunState()
    t_recv = 1_800_000_000.0
    start = time.perf_counter()
    with JournalWriter(path) as journal:
        write, apply = journal.write, state.apply
        for line in lines:
            e = decode_probe_line(line, t_recv)
            write(e)
            apply(e)
    return time.perf_counter() - start, state


def stage_decode(lines: list[bytes]) -> float:
    start = time.perf_counter()
    for line in lines:  # not kept: holding 200,000 events would time the garbage collector instead
        decode_probe_line(line, 1.0)
    return time.perf_counter() - start


def stage_journal(events: list, folder: str) -> float:
    path = os.path.join(folder, "stage.jsonl")
    if os.path.exists(path):
        os.unlink(path)
    start = time.perf_counter()
    with JournalWriter(path) as journal:
        for e in events:
            journal.write(e)
    return time.perf_counter() - start


def stage_encode(events: list) -> float:
    start = time.perf_counter()
    for e in events:
        encode_event(e)
    return time.perf_counter() - start


def stage_reduce(events: list) -> float:
    state = RunState()
    start = time.perf_counter()
    for e in events:
        state.apply(e)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "recorder_ingest.json"))
    args = ap.parse_args()
    pinned = _pin()
    lines = probe_lines(args.events)
    n = len(lines)
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="nd-ingest-") as folder:
        for _ in range(args.rounds):
            wall, state = end_to_end(lines, folder)
            best["end_to_end"] = min(best.get("end_to_end", wall), wall)
            assert state.steps_done == args.events and state.event_count == n
            dec = stage_decode(lines)
            best["decode"] = min(best.get("decode", dec), dec)
            events = [decode_probe_line(line, 1.0) for line in lines]
            enc = stage_encode(events)
            best["encode"] = min(best.get("encode", enc), enc)
            jw = stage_journal(events, folder)
            best["journal_write"] = min(best.get("journal_write", jw), jw)
            red = stage_reduce(events)
            best["reduce"] = min(best.get("reduce", red), red)
        journal_bytes = os.path.getsize(os.path.join(folder, "events.jsonl"))
    rate = {k: round(n / v) for k, v in best.items()}
    us = {k: round(v / n * 1e6, 3) for k, v in best.items()}
    result = {
        "benchmark": "recorder_ingest",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": f"python benchmarks/recorder_ingest.py --events {args.events} --rounds {args.rounds}",
        "python": platform.python_version(),
        "cpu": pinned,
        "events": n,
        "events_per_s": rate["end_to_end"],
        "goal_events_per_s": GOAL,
        "meets_goal": rate["end_to_end"] >= GOAL,
        "us_per_event": us,
        "stage_events_per_s": {k: v for k, v in rate.items() if k != "end_to_end"},
        "journal_bytes_per_event": round(journal_bytes / n, 1),
        "before": BEFORE,
        "note": "best of rounds; one thread; stages measured alone on the same lines",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
