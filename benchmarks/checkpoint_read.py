"""Does reading a checkpoint stay fast with the owned encoding? (issue 50 item 2, issue 53 items 3-5)

For each size, a RunState is reduced from generated events (one rank, a step every 20 ms, a loss
line every 100 steps, a compile at the start), then written and read back both ways in this one
process, so the ratio is of the same state on the same machine at the same moment (CPU time of the process,
time.process_time: the machine it was measured on is shared):

    new   store/checkpoint.py as it is: the state as store/state_codec.py's table (msgpack), zstd,
          the typed header, every bound checked, the journal CRC (read_checkpoint on a real file)
    old   what checkpoint.py did before: pickle protocol 5, zstd, an allow-list unpickler of
          neurondesk.core's classes (replicated here); the header, digest and CRC costs left out,
          so the old figure is if anything low

The old way only works on a state whose JobReducer has not cached its JobIdentity under msgspec
0.23 (issue 53 item 3), so neither state here has one cached. Each read is timed --rounds times,
the median kept; the write (encoding and compressing, what the recorder spends every 10 s) too.
Results: benchmarks/results/checkpoint_read.json.

    .venv/bin/python benchmarks/checkpoint_read.py --steps 10000,1000000 --rounds 5
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from neurondesk.core.events import run_events as ev  # noqa: E402
from neurondesk.core.reduce.state import RunState  # noqa: E402
from neurondesk.store import checkpoint as ck  # noqa: E402
from neurondesk.store.journal import JournalWriter  # noqa: E402


class _OldUnpickler(pickle.Unpickler):  # checkpoint.py's before this change
    _OTHER = {("collections", "deque"), ("collections", "Counter"), ("array", "array"),
              ("array", "_array_reconstructor"), ("builtins", "set"), ("builtins", "frozenset")}

    def find_class(self, module: str, name: str):
        if (module, name) in self._OTHER or module.startswith("neurondesk.core."):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a run state")


def record(run: Path, steps: int) -> RunState:
    writer = JournalWriter(run / "events.jsonl", segment_bytes=None)
    state = RunState()
    t = 1_800_000_000.0

    def put(e: ev.Event) -> None:
        writer.write(e)
        state.apply(e)

    put(ev.RunStarted(t=t, run_id="bench", command=["python", "train.py"], warmup_steps=3))
    put(ev.ProcessAttached(t=t, pid=11, rank=0))
    put(ev.CompileFinished(t=t + 5, source="probe", duration_s=5.0, pid=11, step=0, graph_hash="g0"))
    for i in range(steps):
        t += 0.02
        put(ev.StepEnded(t=t, pid=11, step=i, duration_s=0.02, samples=8, tokens=1024, data_wait_s=0.001,
                         compiles=int(i == 0)))
        if i % 100 == 0:
            put(ev.OutputLine(t=t, stream="stdout", text=f"step {i} loss {2.0 / (1 + i / 1000):.4f}"))
    writer.flush()
    writer.close()
    return state


def timed(fn, rounds: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(rounds):  # CPU time of this process: the machine is shared, wall time is not ours alone
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times), times


def one(steps: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        run.chmod(0o700)
        state = record(run, steps)
        size = (run / "events.jsonl").stat().st_size
        new_bytes = ck.write_checkpoint(run, state, run / "events.jsonl", (0, size))
        new_s, new_all = timed(lambda: ck.read_checkpoint(run / "checkpoint.bin", run / "events.jsonl"), rounds)
        old_payload = zstandard.ZstdCompressor(level=1).compress(pickle.dumps(state, protocol=5))

        def old_read() -> RunState:
            data = zstandard.ZstdDecompressor().decompress(old_payload)
            return _OldUnpickler(io.BytesIO(data)).load()

        old_s, old_all = timed(old_read, rounds)
        encode_s, _ = timed(lambda: ck.encode_checkpoint(state, run / "events.jsonl", (0, size)), rounds)
        old_encode_s, _ = timed(lambda: zstandard.ZstdCompressor(level=1).compress(pickle.dumps(state, protocol=5)),
                                rounds)
    return {"steps": steps, "journal_bytes": size, "new_bytes": new_bytes, "old_payload_bytes": len(old_payload),
            "new_read_s": round(new_s, 5), "old_read_s": round(old_s, 5), "ratio_new_old": round(new_s / old_s, 2),
            "new_write_encode_s": round(encode_s, 5),
            "old_write_encode_s": round(old_encode_s, 5), "ratio_write_new_old": round(encode_s / old_encode_s, 2), "new_read_all_s": [round(x, 5) for x in new_all],
            "old_read_all_s": [round(x, 5) for x in old_all]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="10000,1000000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "checkpoint_read.json"))
    args = ap.parse_args()
    rows = [one(int(n), args.rounds) for n in args.steps.split(",")]
    for r in rows:
        print(f"{r['steps']:>9,} steps: read new {r['new_read_s'] * 1e3:7.1f} ms, old {r['old_read_s'] * 1e3:7.1f} ms "
              f"(new/old {r['ratio_new_old']}); write new {r['new_write_encode_s'] * 1e3:.1f} ms, old "
              f"{r['old_write_encode_s'] * 1e3:.1f} ms; checkpoint {r['new_bytes']:,} B (old payload {r['old_payload_bytes']:,} B)")
    out = {"command": "python benchmarks/checkpoint_read.py " + " ".join(sys.argv[1:]),
           "python": platform.python_version(), "msgspec": msgspec.__version__, "machine": platform.machine(),
           "cpus": __import__("os").cpu_count(), "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
