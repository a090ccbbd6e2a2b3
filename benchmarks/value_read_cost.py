"""What the probe's value-read hooks cost a read (issue 34 item 7).

Once torch_xla is imported the probe hooks torch.Tensor's value-reading methods (.item(), .tolist(),
bool(t) ...) to count the graphs an XLA read runs. A CPU tensor's read has no graph to count: it must
cost (nearly) what it costs without neurondesk. In one invocation, in interleaved rounds, each read
is timed on plain torch (the hooks taken out of torch.Tensor) and with the probe's hooks in (this
tree's values.py, and with --baseline REV an earlier commit's values.py, loaded into the same probe
package): CPU tensors, and an XLA tensor (PJRT_DEVICE=CPU) whose value is already computed (a read
that runs no new graph: the cheapest XLA read there is).

    PJRT_DEVICE=CPU .venv/bin/python benchmarks/value_read_cost.py [--calls 200000] [--rounds 5] [--baseline REV]

Writes benchmarks/results/value_read_cost.json (the command is in it): ns per call, median over the
rounds, and each variant's ratio to plain torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_machine import machine

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
VALUES = "neurondesk/probe/bootstrap/_neurondesk_probe/values.py"
RESULTS = REPO / "benchmarks" / "results"


def _sink() -> str:
    """A Unix socket that accepts the probe's connection and reads whatever it sends."""
    path = os.path.join(tempfile.mkdtemp(prefix="nd-vr-"), "p.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)

    def serve():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=lambda c=conn: [None for _ in iter(lambda: c.recv(1 << 16), b"")],
                             daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return path


def _values_module(probe_pkg, rev: str):
    """values.py of commit ``rev``, loaded as a module of the probe package (its relative imports)."""
    text = subprocess.run(["git", "show", f"{rev}:{VALUES}"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="nd-vr-old-")) / "values_baseline.py"
    path.write_text(text)
    name = f"{probe_pkg.__name__}.values_baseline"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", help="an earlier commit whose values.py is timed too")
    args = ap.parse_args()
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    sys.path.insert(0, str(BOOTSTRAP))
    import _neurondesk_probe as pkg
    import torch
    import torch_xla

    probe = pkg.Probe(_sink())
    probe.xla.xlac = torch_xla._XLAC
    names = probe.values.NAMES
    plain = {n: torch.Tensor.__dict__.get(n) for n in names}

    def unpatch():
        for n, raw in plain.items():
            if raw is None:
                if n in torch.Tensor.__dict__:
                    delattr(torch.Tensor, n)
            else:
                setattr(torch.Tensor, n, raw)

    variants = {"plain torch": unpatch, "this tree": lambda: probe.values.patch_value_reads()}
    if args.baseline:
        old = _values_module(pkg, args.baseline).ValueReads(probe)
        variants[f"values.py of {args.baseline}"] = old.patch_value_reads
    cpu = torch.tensor(1.5)
    xt = torch.tensor(1.5, device=torch_xla.device()) * 2
    torch_xla.sync()
    xt.item()  # computed: later reads run no graph
    def item(t, n):
        for _ in range(n):
            t.item()

    def truth(t, n):
        for _ in range(n):
            bool(t)

    def tolist(t, n):
        for _ in range(n):
            t.tolist()

    reads = {"cpu .item()": (item, cpu, args.calls), "cpu bool(t)": (truth, cpu, args.calls),
             "cpu .tolist()": (tolist, cpu, args.calls),
             "xla .item() (no new graph)": (item, xt, max(1, args.calls // 10))}
    times: dict[str, dict[str, list[float]]] = {r: {v: [] for v in variants} for r in reads}
    for _ in range(args.rounds):
        for vname, install in variants.items():
            unpatch()
            install()
            for rname, (loop, t, n) in reads.items():
                t0 = time.perf_counter()
                loop(t, n)
                times[rname][vname].append((time.perf_counter() - t0) / n * 1e9)
    unpatch()
    out = {"benchmark": "value_read_cost", "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "command": "PJRT_DEVICE=CPU .venv/bin/python benchmarks/value_read_cost.py " + " ".join(sys.argv[1:]),
           "machine": machine(), "torch": torch.__version__, "torch_xla": torch_xla.__version__,
           "calls_per_round": args.calls, "rounds": args.rounds, "ns_per_call_median": {}, "ratio_to_plain": {}}
    for rname, by_variant in times.items():
        med = {v: round(statistics.median(ts), 1) for v, ts in by_variant.items()}
        out["ns_per_call_median"][rname] = med
        out["ratio_to_plain"][rname] = {v: round(m / med["plain torch"], 3) for v, m in med.items()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "value_read_cost.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("ns_per_call_median", "ratio_to_plain")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
