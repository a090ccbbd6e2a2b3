"""The probe's own cost per training step, in microseconds, measured in-process.

Drives the real probe hooks the way a step does (forward pre-hook on the outermost module,
optimizer-step hooks, the XLA sync wrapper, the step message over a real Unix socket to a
reader in another process, as the recorder is) and compares with the same loop without the
probe. Baseline and probe loops are interleaved in the same invocation.

    .venv/bin/python benchmarks/probe_step_cost.py [--steps 20000] [--probe-dir DIR]

Writes benchmarks/results/probe_step_cost.json (not with --probe-dir, which measures another
version of the probe for comparison). For the probe installed as a run installs it, with
optimizer.step() itself, see probe_step_microbench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch  # noqa: E402
from probe_step_microbench import READER  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--probe-dir", default=str(BOOTSTRAP), help="folder holding another _neurondesk_probe package (of this layout)")
    args = ap.parse_args()
    sys.path.insert(0, args.probe_dir)
    import _neurondesk_probe as probe_mod
    folder = tempfile.mkdtemp(prefix="nd-bench-")
    path = os.path.join(folder, "s")
    # The reader of probe_step_microbench.py: reads lines as the recorder does, in its own process
    # (a reader thread here would share the GIL and fall behind the batched sends).
    reader = subprocess.Popen([sys.executable, "-c", READER, path], stdout=subprocess.PIPE, text=True)
    assert reader.stdout.readline().strip() == "ready"

    probe = probe_mod.Probe(path)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.zeros(8, 64, dtype=torch.long)

    def eager_step_with_probe() -> None:
        probe.forward.top_forward(model, (x,), {})  # a training forward: grad mode and eval mode are checked
        probe.guarded(probe.clock.mark_presync, hook="presync")  # what the backward wrapper does
        probe.optim.pre(opt, (), {})
        probe.optim.post(opt, (), {})  # eager: ends the step, sends one message

    def eager_step_without() -> None:
        pass

    def timed(fn, n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e6

    probe.devices.device_reported = True  # the one-off device report is not a per-step cost
    probe.clock.has_optimizer = True  # a training script: forwards are told from evaluation ones
    with_us, without_us = [], []
    for _ in range(args.rounds):
        without_us.append(timed(eager_step_without, args.steps))
        with_us.append(timed(eager_step_with_probe, args.steps))
    eager = statistics.median(with_us) - statistics.median(without_us)

    xla_us = None
    try:
        import torch_xla

        raw_sync = torch_xla.sync
        probe.xla.patch_torch_xla(torch_xla)
        wrapped = torch_xla.sync
        probe.clock.opt_stepped = False
        probe.clock.lead_optimizer = id(opt)  # syncs inside a step: measured without a step message
        raw, wrap = [], []
        for _ in range(args.rounds):
            raw.append(timed(raw_sync, args.steps // 2))
            wrap.append(timed(wrapped, args.steps // 2))
        xla_us = statistics.median(wrap) - statistics.median(raw)
    except ImportError:
        pass

    # The probe sends in batches (every 50 ms, or 64 KiB): hand over the rest, as at the workload's
    # exit, then close so that the reader has counted every message.
    probe.flush_at_exit()
    with probe.transport.lock:
        if probe.transport.sock is not None:
            probe.transport.sock.shutdown(socket.SHUT_WR)
    received = json.loads(reader.stdout.readline())
    reader.wait(timeout=60)

    result = {
        "benchmark": "probe_step_cost",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": f".venv/bin/python benchmarks/probe_step_cost.py --steps {args.steps} --rounds {args.rounds}"
        + ("" if args.probe_dir == str(BOOTSTRAP) else f" --probe-dir {args.probe_dir}"),
        "eager_step_hooks_and_message_us": round(eager, 2),
        "xla_sync_wrapper_us": None if xla_us is None else round(xla_us, 2),
        "messages_received": received,
        "messages_dropped_by_probe": probe.transport.dropped,
        "probe": args.probe_dir if args.probe_dir != str(BOOTSTRAP) else "neurondesk/probe/bootstrap",
        "note": "per-step probe cost = eager figure (+ the sync wrapper on XLA); compare with the steady step time",
    }
    print(json.dumps(result, indent=2))
    if args.probe_dir == str(BOOTSTRAP):
        out = REPO / "benchmarks" / "results" / "probe_step_cost.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
