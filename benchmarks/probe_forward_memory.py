"""The probe's memory and time in an eager inference loop with no step boundary (issue 34 item 5).

A model's forwards with no optimizer and no backward (an inference or evaluation job) never end a
step, so whatever the probe keeps per forward until the step's end grows for as long as the loop
runs. This runs 1,000,000 forwards of a tiny model (eager torch on the CPU) in a fresh process with
the real probe, installed as the bootstrap installs it (``install()`` before torch, a real Unix
socket to a reader process), and the same loop in a fresh process without the probe, and reports
each one's resident memory after 10,000 forwards and after all of them: the probe's growth is
the difference of the two growths (the baseline, in the same invocation, takes out torch's own).

    .venv/bin/python benchmarks/probe_forward_memory.py [--forwards 1000000] [--baseline REV] [--rounds 3]

Each process also times its loop: the probe's cost per forward is the difference of the two
(``us_per_forward``; the forward watch runs at every call of the outermost module's class). With
``--baseline REV`` a third process runs the probe of that commit (extracted into a temporary
folder as probe_step_microbench.py does) in the same invocation, for a ratio against it.

Writes benchmarks/results/probe_forward_memory.json (the same command is in it). ``--child``
is one measured process (tests/system/test_probe_ranges.py runs it with a few thousand forwards).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
RESULTS = REPO / "benchmarks" / "results"
FIRST = 10_000
MIB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(forwards: int, with_probe: bool, bootstrap: Path = BOOTSTRAP) -> dict:
    probe = reader = None
    if with_probe:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from probe_step_microbench import READER

        folder = tempfile.mkdtemp(prefix="nd-fm-")
        path = os.path.join(folder, "probe.sock")
        reader = subprocess.Popen([sys.executable, "-c", READER, path], stdout=subprocess.PIPE, text=True,
                                  stderr=subprocess.DEVNULL)
        assert reader.stdout.readline().strip() == "ready"
        os.environ["NEURONDESK_SOCKET"] = path
        sys.path.insert(0, str(bootstrap))
        import _neurondesk_probe as probe_mod

        probe_mod.install()
        probe = probe_mod._probe
    import torch

    model = torch.nn.Linear(4, 1)
    x = torch.randn(2, 4)
    out = {}
    with torch.no_grad():
        t0 = time.perf_counter()
        for i in range(forwards):
            model(x)
            if i + 1 == min(FIRST, forwards):
                out["rss_first"] = rss()
        out["us_per_forward"] = (time.perf_counter() - t0) / forwards * 1e6
    out["rss_last"] = rss()
    if probe is not None:
        reader.kill()  # no step: the probe may never have connected, and the reader waits for it
        out["kept_shapes"] = len(probe.clock.shapes) + len(probe.clock.loader_shapes)
        out["steps"] = probe.clock.step
        out["shapes_keep"] = getattr(sys.modules.get("_neurondesk_probe.shapes"), "SHAPES_KEEP", None)
    return out


def baseline_probe(rev: str) -> Path:
    """The probe of commit ``rev`` in a temporary folder (probe_step_microbench's extraction)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from probe_step_microbench import extract_probe

    folder = Path(tempfile.mkdtemp(prefix="nd-fm-base-"))
    extract_probe(rev, folder)
    return folder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forwards", type=int, default=1_000_000)
    ap.add_argument("--child", choices=["probe", "plain"])
    ap.add_argument("--bootstrap", default=str(BOOTSTRAP), help=argparse.SUPPRESS)
    ap.add_argument("--baseline", help="a commit whose probe runs as a third arm, for a ratio")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median time per arm")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.forwards, args.child == "probe", Path(args.bootstrap))), flush=True)
        return
    arms = {"plain": ("plain", BOOTSTRAP), "probe": ("probe", BOOTSTRAP)}
    if args.baseline:
        arms["baseline"] = ("probe", baseline_probe(args.baseline))
    runs: dict[str, list[dict]] = {name: [] for name in arms}
    order = list(arms)
    for i in range(args.rounds):  # interleaved, each round in the other order: the machine's noise on every arm
        for name in order if i % 2 == 0 else order[::-1]:
            kind, bootstrap = arms[name]
            p = subprocess.run([sys.executable, __file__, "--child", kind, "--forwards", str(args.forwards),
                                "--bootstrap", str(bootstrap)], capture_output=True, text=True, check=True,
                               env={**os.environ, "PJRT_DEVICE": "CPU"})
            runs[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
    growth = {k: max((r["rss_last"] - r["rss_first"]) / MIB for r in rs) for k, rs in runs.items()}
    per = {k: round(statistics.median(r["us_per_forward"] for r in rs), 3) for k, rs in runs.items()}
    runs = {k: rs[0] for k, rs in runs.items()}
    base = (" --baseline " + args.baseline if args.baseline else "") + f" --rounds {args.rounds}"
    result = {
        "command": f".venv/bin/python benchmarks/probe_forward_memory.py --forwards {args.forwards}{base}",
        "forwards": args.forwards, "from_forward": FIRST,
        "rss_growth_mib": {k: round(v, 3) for k, v in growth.items()},
        "probe_growth_mib": round(growth["probe"] - growth["plain"], 3),
        "kept_shapes": runs["probe"].get("kept_shapes"),
        "bound_mib": 1.0,
        "us_per_forward": per,
        "probe_cost_us_per_forward": round(per["probe"] - per["plain"], 3),
        "note": "memory: the largest growth of each arm's rounds; time: the median of its rounds (interleaved)",
    }
    if args.baseline:
        result["baseline"] = args.baseline
        result["baseline_cost_us_per_forward"] = round(per["baseline"] - per["plain"], 3)
    result["within_bound"] = result["probe_growth_mib"] <= 1.0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "probe_forward_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
