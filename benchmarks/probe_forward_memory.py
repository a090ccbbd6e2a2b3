"""The probe's memory in an eager inference loop with no step boundary (issue 34 item 5).

A model's forwards with no optimizer and no backward (an inference or evaluation job) never end a
step, so whatever the probe keeps per forward until the step's end grows for as long as the loop
runs. This runs 1,000,000 forwards of a tiny model (eager torch on the CPU) in a fresh process with
the real probe, installed as the bootstrap installs it (``install()`` before torch, a real Unix
socket to a reader process), and the same loop in a fresh process without the probe, and reports
each one's resident memory after 10,000 forwards and after all of them: the probe's growth is
the difference of the two growths (the baseline, in the same invocation, takes out torch's own).

    .venv/bin/python benchmarks/probe_forward_memory.py [--forwards 1000000]

Writes benchmarks/results/probe_forward_memory.json (the same command is in it). ``--child``
is one measured process (tests/test_probe_ranges.py runs it with a few thousand forwards).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
RESULTS = REPO / "benchmarks" / "results"
FIRST = 10_000
MIB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(forwards: int, with_probe: bool) -> dict:
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
        sys.path.insert(0, str(BOOTSTRAP))
        import _neurondesk_probe as probe_mod

        probe_mod.install()
        probe = probe_mod._probe
    import torch

    model = torch.nn.Linear(4, 1)
    x = torch.randn(2, 4)
    out = {}
    with torch.no_grad():
        for i in range(forwards):
            model(x)
            if i + 1 == min(FIRST, forwards):
                out["rss_first"] = rss()
    out["rss_last"] = rss()
    if probe is not None:
        reader.kill()  # no step: the probe may never have connected, and the reader waits for it
        out["kept_shapes"] = len(probe.clock.shapes) + len(probe.clock.loader_shapes)
        out["steps"] = probe.clock.step
        out["shapes_keep"] = getattr(sys.modules.get("_neurondesk_probe.shapes"), "SHAPES_KEEP", None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forwards", type=int, default=1_000_000)
    ap.add_argument("--child", choices=["probe", "plain"])
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.forwards, args.child == "probe")), flush=True)
        return
    runs = {}
    for kind in ("plain", "probe"):
        p = subprocess.run([sys.executable, __file__, "--child", kind, "--forwards", str(args.forwards)],
                           capture_output=True, text=True, check=True, env={**os.environ, "PJRT_DEVICE": "CPU"})
        runs[kind] = json.loads(p.stdout.strip().splitlines()[-1])
    growth = {k: (r["rss_last"] - r["rss_first"]) / MIB for k, r in runs.items()}
    result = {
        "command": f".venv/bin/python benchmarks/probe_forward_memory.py --forwards {args.forwards}",
        "forwards": args.forwards, "from_forward": FIRST,
        "rss_growth_mib": {k: round(v, 3) for k, v in growth.items()},
        "probe_growth_mib": round(growth["probe"] - growth["plain"], 3),
        "kept_shapes": runs["probe"].get("kept_shapes"),
        "bound_mib": 1.0,
    }
    result["within_bound"] = result["probe_growth_mib"] <= 1.0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "probe_forward_memory.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
