"""`neurondesk export` of a 1M-step run: bounded time and size.

    .venv/bin/python benchmarks/export_1m.py [--steps 1000000] [--out benchmarks/results/export_1m.json]

The run is synthetic (no workload makes 1M steps on this 2-core machine in reasonable time): its
journal is written by the real JournalWriter (segments, compression) with the events a real
1-rank run journals: the start, the process, 1M steps (samples, data wait, presync), a first
compile and a recompile, a host sample every 1,000 steps, notices, the end. Measured in the same
invocation: reading the journal alone (iter_journal: the baseline any reader pays), `neurondesk
summary` (the reduction), `export` of the whole run and of a 10k-step window; the results are
ratios against that baseline, with the sizes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from neurondesk.core import events as ev  # noqa: E402
from neurondesk.core.events.device_events import HostSample  # noqa: E402
from neurondesk.store.journal import JournalWriter, iter_journal  # noqa: E402


def write_run(run: Path, steps: int) -> None:
    run.mkdir(parents=True)
    t = 1_800_000_000.0
    with JournalWriter(run / "events.jsonl") as j:
        j.write(ev.RunStarted(t=t, run_id="export-1m", command=["python", "train.py"], price_per_hour=1.34375))
        j.write(ev.ProcessAttached(t=t + 1, pid=4242, rank=0, world_size=1))
        t += 2
        for i in range(steps):
            d = 0.02 + (0.005 if i % 97 == 0 else 0.0)
            compiles = 1 if i in (0, 500_000) else 0
            if compiles:
                j.write(ev.CompileStarted(t=t, source="probe", pid=4242, step=i))
                t += 30.0
                j.write(ev.CompileFinished(t=t, source="probe", duration_s=30.0, pid=4242, step=i, graph_hash=f"h{i}",
                                           cache="miss", location="train.py:73"))
            t += d
            j.write(ev.StepEnded(t=t, pid=4242, step=i, duration_s=d, samples=8, data_wait_s=0.001, executions=1,
                                 compiles=compiles, presync_s=0.004))
            if i % 1000 == 0:
                j.write(HostSample(t=t, cpu_percent=50.0 + i % 7))
            if i % 250_000 == 0:
                j.write(ev.Notice(t=t, level="info", message=f"checkpoint at step {i}"))
        j.write(ev.RunFinished(t=t + 1, exit_code=0))


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "export_1m.json"))
    args = p.parse_args()
    nd = [sys.executable, "-m", "neurondesk.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        write_run(run, args.steps)
        written_s = time.perf_counter() - t0
        journal_bytes = sum(f.stat().st_size for f in run.iterdir() if f.name.startswith("events"))
        t0 = time.perf_counter()
        n = sum(1 for _ in iter_journal(run / "events.jsonl", []))
        read_s = time.perf_counter() - t0
        summary_s = timed([*nd, "summary", str(run), "--format", "json"])  # reduces, and checkpoints nothing
        whole, window = Path(tmp) / "whole.json", Path(tmp) / "window.json"
        export_s = timed([*nd, "export", str(run), "-o", str(whole)])
        lo = args.steps * 6 // 10  # a 10k-step window past the recompile
        window_s = timed([*nd, "export", str(run), "--from-step", str(lo), "--to-step", str(lo + 9999), "-o", str(window)])
        doc = json.loads(whole.read_text())
        win = json.loads(window.read_text())
        assert sum(1 for e in win["traceEvents"] if e.get("cat") == "step") == min(10_000, args.steps - lo)
        spans = sum(1 for e in doc["traceEvents"] if e.get("cat") in ("step", "steps"))
        result = {
            "steps": args.steps, "journal_events": n, "journal_bytes": journal_bytes, "write_journal_s": round(written_s, 2),
            "baseline_read_journal_s": round(read_s, 2), "summary_s": round(summary_s, 2),
            "export_whole_s": round(export_s, 2), "export_whole_bytes": whole.stat().st_size,
            "export_whole_events": len(doc["traceEvents"]), "export_whole_step_spans": spans,
            "export_window_10k_s": round(window_s, 2), "export_window_10k_bytes": window.stat().st_size,
            "ratio_export_whole_to_read": round(export_s / read_s, 2),
            "ratio_export_window_to_read": round(window_s / read_s, 2),
            "ratio_export_bytes_to_journal_bytes": round(whole.stat().st_size / journal_bytes, 3),
            "command": f"python benchmarks/export_1m.py --steps {args.steps}",
        }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
