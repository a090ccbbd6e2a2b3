"""N simulated ranks for benchmarks/many_probes.py: each a Python process of its own (RANK, LOCAL_RANK,
WORLD_SIZE set as torchrun sets them) whose probe (installed by neurondesk's sitecustomize, as in any
workload) ends a step every ``--step-s`` for ``--seconds`` (the step rate of a real job), then
``--burst`` steps as fast as it can (a burst: every rank at once), through the probe's own
StepClock.end_step and transport (batching, columns, the socket), no torch. Each rank then prints
``many-probes: {"rank": R, "steps": N, "probe": true}``; the parent waits for all of them.

    python benchmarks/many_probes_workload.py --ranks 64 --seconds 20 --step-s 0.2 --burst 2000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def rank_main(args) -> int:
    probe_mod = sys.modules.get("_neurondesk_probe")
    probe = getattr(probe_mod, "_probe", None)
    steps = 0
    end = time.monotonic() + args.seconds
    next_t = time.monotonic()
    clock = probe.clock if probe is not None else None
    while time.monotonic() < end:
        if clock is not None:
            clock.samples = 8
            clock.end_step()
        steps += 1
        next_t += args.step_s
        time.sleep(max(0.0, next_t - time.monotonic()))
    for _ in range(args.burst):
        if clock is not None:
            clock.samples = 8
            clock.end_step()
        steps += 1
    print("many-probes: " + json.dumps({"rank": int(os.environ["RANK"]), "steps": steps, "probe": clock is not None}),
          flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--step-s", type=float, default=0.2)
    ap.add_argument("--burst", type=int, default=2000)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        return rank_main(args)
    children = []
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(args.ranks),
                   LOCAL_WORLD_SIZE=str(args.ranks))
        children.append(subprocess.Popen([sys.executable, __file__, "--rank", "--seconds", str(args.seconds),
                                          "--step-s", str(args.step_s), "--burst", str(args.burst)], env=env))
    return max(c.wait() for c in children)


if __name__ == "__main__":
    sys.exit(main())
