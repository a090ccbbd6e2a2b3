"""What the disk sampler's walk of the run's own folders costs (collectors/devices/disk.py: every 5 s, in
the telemetry's disk thread), at the walk's bound (WALK_MAX files) and past it (not measured: the first
walk stops at the bound, the later ones are skipped). Rerun:

    PYTHONPATH=. .venv/bin/python benchmarks/disk_sampler_walk.py --out benchmarks/results/disk_sampler_walk.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

from neurondesk.collectors.devices.disk import WALK_MAX, DiskSampler


def measure(files: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        cache = Path(d) / "neff"
        for i in range(files):
            sub = cache / f"k{i // 100}"
            sub.mkdir(parents=True, exist_ok=True)
            (sub / f"{i}.neff").write_bytes(b"x")
        sampler = DiskSampler({"run folder": str(Path(d) / "run"), "NEFF cache": str(cache)})
        times, own = [], None
        for _ in range(rounds):
            t = time.perf_counter()
            own = sampler.sample().filesystems[0].own_bytes
            times.append(time.perf_counter() - t)
    return {"files": files, "median_ms": round(statistics.median(times) * 1000, 1),
            "max_ms": round(max(times) * 1000, 1), "measured": own is not None}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--out")
    a = p.parse_args()
    rows = [measure(n, a.rounds) for n in (500, WALK_MAX, 4 * WALK_MAX)]
    result = {"walk_max": WALK_MAX, "rounds": a.rounds, "machine": platform.node(), "rows": rows,
              "note": "a sample every 5 s: the median over 5 s is the share of one core the walk takes"}
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
