"""Live soak (issue 21, item 6b): a paced workload at about 200 steps/s for 30 minutes under
`neurondesk run --detach`, with the Textual console attached in a real pseudo-terminal; the
recorder's and the console's RSS and CPU sampled every 10 s from /proc.

Reports, per process: the RSS slope (MiB per hour, least squares) over the samples after
``--settle-min`` (default 10: the bounded buffers are full by then: the 5,000 output lines the
recorder's state and the console's log keep take 5.5 minutes at the workload's 15 lines/s), the
RSS at the start, at the settle point and at the end, and the CPU used as a share of one core over
the whole soak; and the workload's own steps/s. Written to benchmarks/results/soak.json.

    .venv/bin/python benchmarks/soak.py                 # 30 minutes (the issue's figure)
    .venv/bin/python benchmarks/soak.py --minutes 3     # a quick look

The machine is shared: CPU shares are the processes' own (utime + stime from /proc), not the
machine's, so other load slows the run but is not counted in them.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the neurondesk of this checkout (PYTHONPATH=REPO below), whichever one the interpreter has installed
ND = [sys.executable, "-c", "import sys; from neurondesk.cli.main import main; sys.exit(main())"]
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def proc_sample(pid: int) -> tuple[float, int] | None:
    """(CPU seconds used so far, RSS bytes) of ``pid``, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        rss_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, rss_pages * PAGE


def slope_mib_per_hour(points: list[tuple[float, int]]) -> float | None:
    """Least-squares slope of RSS over time, MiB per hour."""
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    if den == 0:
        return None
    return sum((t - mt) * (r - mr) for t, r in points) / den * 3600 / (1 << 20)


SCREEN_TAIL: list[bytes] = []  # the console's last output, said if it exits early


def attach_console(run_dir: Path, env: dict) -> tuple[int, int]:
    """`neurondesk attach RUN` in a pseudo-terminal (pid, master fd); its screen output is drained."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(ND[0], [*ND, "attach", str(run_dir)], env)

    def drain() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            SCREEN_TAIL[:] = (SCREEN_TAIL + [chunk])[-4:]
    threading.Thread(target=drain, daemon=True).start()
    return pid, fd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--step-s", type=float, default=0.005, help="the workload's pace, its sleep included (0.005 s reaches about 160-180 steps/s here)")
    ap.add_argument("--every-s", type=float, default=10.0)
    ap.add_argument("--settle-min", type=float, default=10.0, help="RSS slope from this minute on (default 10)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "soak.json"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nd-soak-"))
    run_dir = tmp / "run"
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48",
           "PYTHONPATH": str(REPO), "NEURONDESK_HOME": str(tmp / "home")}
    seconds = args.minutes * 60
    workload = [sys.executable, str(REPO / "benchmarks" / "paced_workload.py"), "--seconds", str(seconds),
                "--step-s", str(args.step_s)]
    started = subprocess.run([*ND, "run", "--detach", "--run-dir", str(run_dir), "--", *workload], env=env,
                             capture_output=True, text=True, timeout=120)
    info_file = run_dir / "recorder.json"
    deadline = time.monotonic() + 60
    while not info_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not info_file.exists():
        sys.exit(f"soak: the run did not start (exit {started.returncode}): {started.stderr.strip()[-500:]}")
    recorder = int(json.loads(info_file.read_text())["pid"])
    console, fd = attach_console(run_dir, env)
    samples: dict[str, list[tuple[float, float, int]]] = {"recorder": [], "console": []}
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds + 5:
            now = time.monotonic() - start
            for name, pid in (("recorder", recorder), ("console", console)):
                got = proc_sample(pid)
                if got is not None:
                    samples[name].append((now, *got))
            if proc_sample(recorder) is None:
                break
            time.sleep(args.every_s)
    finally:
        try:
            os.kill(console, 15)
            os.waitpid(console, 0)
        except OSError:
            pass
        os.close(fd)
    deadline = time.monotonic() + 60
    while proc_sample(recorder) is not None and time.monotonic() < deadline:
        time.sleep(1)
    rate = None
    stdout = run_dir / "stdout.log"
    if stdout.exists():
        for line in stdout.read_text(errors="replace").splitlines():
            if line.startswith("workload-rate: "):
                rate = json.loads(line.removeprefix("workload-rate: "))
    result = {"minutes": args.minutes, "step_s": args.step_s, "every_s": args.every_s, "settle_min": args.settle_min,
              "workload": rate, "processes": {}}
    for name, rows in samples.items():
        if len(rows) < 2:
            result["processes"][name] = {"samples": len(rows)}
            continue
        settle = args.settle_min * 60
        later = [(t, rss) for t, _, rss in rows if t >= settle] or [(t, rss) for t, _, rss in rows]
        wall = rows[-1][0] - rows[0][0]
        result["processes"][name] = {
            "samples": len(rows),
            "rss_start_mib": round(rows[0][2] / (1 << 20), 1),
            "rss_settled_mib": round(later[0][1] / (1 << 20), 1),
            "rss_end_mib": round(rows[-1][2] / (1 << 20), 1),
            "rss_slope_mib_per_hour": None if (s := slope_mib_per_hour(later)) is None else round(s, 2),
            "cpu_share_of_a_core": round((rows[-1][1] - rows[0][1]) / wall, 4) if wall > 0 else None,
        }
    if samples["console"] and samples["console"][-1][2] == 0:
        result["console_ended_early"] = b"".join(SCREEN_TAIL)[-2000:].decode(errors="replace")
    result["rss_mib_samples"] = {name: [round(rss / (1 << 20), 1) for _, _, rss in rows]
                                 for name, rows in samples.items()}
    result["command"] = f".venv/bin/python benchmarks/soak.py --minutes {args.minutes:g} --step-s {args.step_s:g}"
    result["head"] = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h %s"],
                                    capture_output=True, text=True).stdout.strip()[:120]
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
