"""What a sink costs the recorder and the training when its server is down or hangs (issue 37's faults).

    .venv/bin/python benchmarks/sink_cost.py [--seconds 30] [--rounds 2]

Each case is a real `neurondesk run --detach` of benchmarks/paced_workload.py (50 steps/s): no sink (the
baseline), `--mlflow` at a server that accepts and never answers (hung), and `--mlflow` at a closed port
(down). Rounds are interleaved so that the machine's load falls on every case alike. Measured: the
recorder process's CPU (user + system, last reading before it exits, over the workload's wall time) and
the workload's own steps/s (its `workload-rate` line); each case as a ratio to the baseline of its round.
Results: benchmarks/results/sink_cost.json.
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
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "benchmarks" / "paced_workload.py"


class HungServer:
    """Accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(case: str, extra: list[str], seconds: float, tmp: Path) -> dict:
    run_dir = tmp / f"{case}-{time.monotonic_ns()}"
    env = dict(os.environ, NEURONDESK_HOME=str(tmp / "home"))
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--detach", "--run-dir", str(run_dir), *extra, "--",
           sys.executable, str(WORKLOAD), "--seconds", str(seconds)]
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=REPO)
    info = json.loads((run_dir / "recorder.json").read_text())
    proc = psutil.Process(info["pid"])
    cpu, t0 = 0.0, time.monotonic()
    while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
        try:
            t = proc.cpu_times()
            cpu = t.user + t.system
        except psutil.Error:
            break
        if (run_dir / "summary.json").exists():
            break  # the run is over; what the recorder does after (closing lines, the grace period) is not the run's
        time.sleep(0.25)
    wall = time.monotonic() - t0
    rate = next((json.loads(line.split("workload-rate:", 1)[1]) for line in
                 (run_dir / "stdout.log").read_text().splitlines() if line.startswith("workload-rate:")), {})
    return {"case": case, "recorder_cpu_share": cpu / wall, "steps_per_s": rate.get("steps_per_s"), "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sink_cost.json")
    args = ap.parse_args()
    hung = HungServer()
    tmp = Path(tempfile.mkdtemp(prefix="nd-sink-cost-"))
    cases = {"no sink": [], "mlflow hung": ["--mlflow", f"http://127.0.0.1:{hung.port}"],
             "mlflow down": ["--mlflow", f"http://127.0.0.1:{closed_port()}"]}
    rows = []
    for r in range(args.rounds):
        for case, extra in cases.items():
            rows.append(one(case, extra, args.seconds, tmp) | {"round": r})
            print(json.dumps(rows[-1]), flush=True)
    summary = {}
    for case in cases:
        mine = [x for x in rows if x["case"] == case]
        base = [x for x in rows if x["case"] == "no sink"]
        summary[case] = {
            "recorder_cpu_share_median": statistics.median(x["recorder_cpu_share"] for x in mine),
            "steps_per_s_median": statistics.median(x["steps_per_s"] for x in mine),
            "steps_per_s_vs_no_sink": statistics.median(
                x["steps_per_s"] / b["steps_per_s"] for x, b in zip(mine, base, strict=True)),
            "recorder_cpu_minus_no_sink": statistics.median(
                x["recorder_cpu_share"] - b["recorder_cpu_share"] for x, b in zip(mine, base, strict=True)),
        }
    result = {"command": f"python benchmarks/sink_cost.py --seconds {args.seconds:g} --rounds {args.rounds}",
              "load_average_1m": os.getloadavg()[0], "rows": rows, "summary": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
