"""Watch cost: what watching a live run costs, on a real recorder and a real attached console.

A small synthetic training loop (benchmarks/paced_workload.py: eager torch on CPU, SGD on a
Linear(4, 1), paced by a fixed sleep to about 50 optimizer steps/s, a log line every 10 steps)
runs for S seconds in three arms, interleaved over R rounds (A B C, then C B A, ...):

  baseline  plain `python paced_workload.py` (stdout to a file, as under neurondesk);
  console   `neurondesk run --detach` + `neurondesk attach RUN` in a 160x48 pseudo-terminal that
            this script drains continuously, as a terminal would;
  recorder  `neurondesk run --detach` with no viewer attached.

Every second (after a warm-up) psutil samples the CPU time (user + system, all threads) and RSS
of the recorder (its pid from RUN/recorder.json) and of the attached console; CPU % of one core
is the CPU time used over the measured window divided by its wall time. The workload reports
its own steps/s (the steps after its first 3 s); the ratio with/without neurondesk is the cost
the training sees. Runs use a temporary NEURONDESK_HOME, AWS_EC2_METADATA_DISABLED=true and
`--price-per-hour 1` (no price or metadata look-ups).

    .venv/bin/python benchmarks/watch_cost.py                      # 60 s per arm, 2 rounds
    .venv/bin/python benchmarks/watch_cost.py --seconds 30 --rounds 3

Goals (issue 8): at 50 steps/s the console <= 3% of one core, the recorder <= 2%.
Results: benchmarks/results/watch_cost.json (per-arm medians over the rounds, each round's values).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil
from bench_machine import cpu_model

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "benchmarks" / "paced_workload.py"
RESULTS = REPO / "benchmarks" / "results" / "watch_cost.json"
COLS, ROWS = 160, 48
GOALS = {"console_cpu_percent_of_one_core": 3.0, "recorder_cpu_percent_of_one_core": 2.0}
ARMS = ("baseline", "console", "recorder")


def bench_env(home: str) -> dict[str, str]:
    return dict(os.environ, NEURONDESK_HOME=home, AWS_EC2_METADATA_DISABLED="true", PYTHONUNBUFFERED="1",
                PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def workload_cmd(seconds: float) -> list[str]:
    return [sys.executable, str(WORKLOAD), "--seconds", f"{seconds:g}"]


def parse_rate(path: Path) -> dict | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith("workload-rate:"):
            return json.loads(line.split(":", 1)[1])
    return None


class PtyConsole:
    """`neurondesk attach RUN` in a COLS x ROWS pseudo-terminal; its output is read and dropped,
    as a terminal would, and the time of its first full frame is noted."""

    def __init__(self, run_dir: Path, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = dict(env, TERM="xterm-256color", COLORTERM="truecolor")
        self.command = [sys.executable, "-m", "neurondesk.cli", "attach", str(run_dir)]
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(self.command, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     cwd=REPO, start_new_session=True)
        os.close(slave)
        self.first_frame_s: float | None = None
        self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        seen = b""
        while not self._stop.is_set():
            r, _, _ = select.select([self.master], [], [], 0.1)
            if not r:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)
            if self.first_frame_s is None:
                seen = (seen + data)[-200_000:]
                if b"neurondesk" in seen and b"Export" in seen:  # header and footer key hints
                    self.first_frame_s = time.monotonic() - self.t_start

    def close(self, timeout: float = 10.0) -> dict:
        """Quit the console of a finished run: q on its summary screen. The console sees the end
        at its next poll (4 a second); a q that came before would ask whether to detach (under
        the summary), so wait a moment first, and press q again if need be; SIGKILL at last."""
        time.sleep(1.0)
        t = time.monotonic()
        how = "q"
        for i in range(3):
            if self.proc.poll() is not None:
                break
            how = f"q x{i + 1}"
            try:
                os.write(self.master, b"q")
                self.proc.wait(timeout / 3)
            except OSError:
                break
            except subprocess.TimeoutExpired:
                continue
        if self.proc.poll() is None:
            how = "SIGKILL"
            os.killpg(self.proc.pid, signal.SIGKILL)
        code = self.proc.wait()
        self._stop.set()
        self._thread.join(2)
        os.close(self.master)
        return {"by": how, "exit_code": code, "took_s": round(time.monotonic() - t, 2)}


class Sampler:
    """psutil samples (monotonic t, cpu seconds, rss) of named processes, once a second."""

    def __init__(self) -> None:
        self.procs: dict[str, psutil.Process] = {}
        self.samples: dict[str, list[tuple[float, float, int]]] = {}

    def add(self, name: str, pid: int) -> None:
        self.procs[name] = psutil.Process(pid)
        self.samples[name] = []

    def sample(self) -> None:
        now = time.monotonic()
        for name, p in self.procs.items():
            try:
                with p.oneshot():
                    ct = p.cpu_times()
                    rss = p.memory_info().rss
            except psutil.Error:
                continue
            self.samples[name].append((now, ct.user + ct.system, rss))

    def summary(self, name: str, t_from: float, t_to: float) -> dict | None:
        s = [x for x in self.samples.get(name, []) if t_from <= x[0] <= t_to]
        if len(s) < 2:
            return None
        cpu = 100.0 * (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0])
        per_s = [100.0 * (b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(s, s[1:], strict=False)]
        rss = [x[2] / 2**20 for x in s]
        return {"cpu_percent_of_one_core": round(cpu, 3),
                "cpu_percent_per_second": {"median": round(statistics.median(per_s), 2),
                                           "max": round(max(per_s), 2)},
                "cpu_seconds": round(s[-1][1] - s[0][1], 3),
                "window_s": round(s[-1][0] - s[0][0], 1),
                "rss_mib": {"first": round(rss[0], 1), "last": round(rss[-1], 1), "max": round(max(rss), 1)}}


def read_info(run_dir: Path, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = json.loads((run_dir / "recorder.json").read_text())
            if info.get("pid") and info.get("workload_pid"):
                return info
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"no recorder.json in {run_dir} after {timeout:.0f} s")


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def journal_counts(path: Path) -> dict:
    steps = outputs = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if b'"kind":"step"' in line or b'"kind": "step"' in line:
                    steps += 1
                elif b'"kind":"output"' in line or b'"kind": "output"' in line:
                    outputs += 1
    except OSError:
        pass
    return {"step_events": steps, "output_events": outputs}


def run_arm(arm: str, seconds: float, warmup_s: float, home: str, tmp: Path, tag: str) -> dict:
    env = bench_env(home)
    sampler = Sampler()
    machine_cpu_start = psutil.cpu_times()
    load_start = os.getloadavg()
    console = None
    run_dir = None
    if arm == "baseline":
        out_path = tmp / f"{tag}.stdout"
        with open(out_path, "wb") as out, open(tmp / f"{tag}.stderr", "wb") as err:
            proc = subprocess.Popen(workload_cmd(seconds), stdout=out, stderr=err, env=env, cwd=REPO)
        workload = psutil.Process(proc.pid)
        t0 = time.monotonic()
    else:
        cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--detach", "--price-per-hour", "1",
               "--", *workload_cmd(seconds)]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=True)
        run_dir = Path(p.stdout.strip().splitlines()[-1])
        info = read_info(run_dir)
        sampler.add("recorder", info["pid"])
        workload = psutil.Process(info["workload_pid"])
        out_path = run_dir / "stdout.log"
        if arm == "console":
            console = PtyConsole(run_dir, env)
            sampler.add("console", console.proc.pid)
    t_measure = time.monotonic() + warmup_s
    t_last_alive = t_measure
    while alive(workload):
        sampler.sample()
        t_last_alive = time.monotonic()
        time.sleep(1.0 - (time.monotonic() - t0) % 1.0)
    if arm == "baseline":
        proc.wait()
    end_cpu = psutil.cpu_times()
    busy = lambda c: c.user + c.nice + c.system + c.irq + c.softirq + getattr(c, "steal", 0.0)  # noqa: E731
    total = lambda c: busy(c) + c.idle + getattr(c, "iowait", 0.0)  # noqa: E731
    machine_busy = 100.0 * (busy(end_cpu) - busy(machine_cpu_start)) / max(1e-9, total(end_cpu) - total(machine_cpu_start))
    result: dict = {"arm": arm}
    if run_dir is not None:  # let the recorder write its summary and exit
        deadline = time.monotonic() + 30
        rec = sampler.procs["recorder"]
        while alive(rec) and time.monotonic() < deadline:
            time.sleep(0.1)
        result["recorder_exited"] = not alive(rec)
        result["summary_written"] = (run_dir / "summary.json").exists()
        result["journal"] = journal_counts(run_dir / "events.jsonl")
        result["run_dir"] = run_dir.name
    if console is not None:
        result["console_close"] = console.close()
        result["console_first_frame_s"] = None if console.first_frame_s is None else round(console.first_frame_s, 3)
        result["terminal_bytes_per_s"] = round(console.bytes / max(1e-9, t_last_alive - console.t_start))
    for name in sampler.procs:
        result[name] = sampler.summary(name, t_measure, t_last_alive)
    result["workload"] = parse_rate(out_path)
    result["machine_busy_percent_of_all_cores"] = round(machine_busy, 1)
    result["load_avg_at_start"] = [round(x, 2) for x in load_start]
    return result


def med(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def dig(d: dict | None, *keys):
    for k in keys:
        if d is None:
            return None
        d = d.get(k)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="workload length per arm (default 60)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the three arms, interleaved (default 2)")
    ap.add_argument("--warmup-s", type=float, default=6.0,
                    help="sampling counts from this long after an arm starts (default 6: torch import, "
                         "console start-up and its catch-up on the journal)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    load_start = [round(x, 2) for x in os.getloadavg()]
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="nd-watch-") as tmp:
        home = str(Path(tmp) / "home")
        for r in range(args.rounds):
            order = ARMS if r % 2 == 0 else tuple(reversed(ARMS))
            for arm in order:
                res = run_arm(arm, args.seconds, args.warmup_s, home, Path(tmp), f"r{r}-{arm}")
                res["round"] = r + 1
                rounds.append(res)
                print(f"round {r + 1}/{args.rounds} {arm:9s} "
                      f"steps/s {dig(res, 'workload', 'steps_per_s')}  "
                      f"busy {dig(res, 'workload', 'busy_ms_median')} ms  "
                      f"recorder {dig(res, 'recorder', 'cpu_percent_of_one_core')}%  "
                      f"console {dig(res, 'console', 'cpu_percent_of_one_core')}%  "
                      f"machine busy {res['machine_busy_percent_of_all_cores']}% of {os.cpu_count()} cores  "
                      f"load {res['load_avg_at_start'][0]}", flush=True)
    load_end = [round(x, 2) for x in os.getloadavg()]

    def arm_rows(arm):
        return [x for x in rounds if x["arm"] == arm]

    base_rate = med([dig(x, "workload", "steps_per_s") for x in arm_rows("baseline")])
    medians: dict = {}
    for arm in ARMS:
        rows = arm_rows(arm)
        m = {
            "workload_steps_per_s": med([dig(x, "workload", "steps_per_s") for x in rows]),
            "workload_busy_ms_per_step": med([dig(x, "workload", "busy_ms_median") for x in rows]),
            "machine_busy_percent_of_all_cores": med([x["machine_busy_percent_of_all_cores"] for x in rows]),
        }
        if base_rate and m["workload_steps_per_s"]:
            m["steps_per_s_ratio_vs_baseline"] = round(m["workload_steps_per_s"] / base_rate, 4)
        for proc in ("recorder", "console"):
            if any(x.get(proc) for x in rows):
                m[f"{proc}_cpu_percent_of_one_core"] = med([dig(x, proc, "cpu_percent_of_one_core") for x in rows])
                m[f"{proc}_rss_mib_last"] = med([dig(x, proc, "rss_mib", "last") for x in rows])
                m[f"{proc}_rss_mib_max"] = med([dig(x, proc, "rss_mib", "max") for x in rows])
        if arm == "console":
            m["console_first_frame_s"] = med([x.get("console_first_frame_s") for x in rows])
            m["terminal_bytes_per_s"] = med([x.get("terminal_bytes_per_s") for x in rows])
        medians[arm] = m

    console_cpu = medians["console"].get("console_cpu_percent_of_one_core")
    recorder_cpu = medians["recorder"].get("recorder_cpu_percent_of_one_core")
    recorder_cpu_with_console = medians["console"].get("recorder_cpu_percent_of_one_core")
    goals_met = {
        "console": console_cpu is not None and console_cpu <= GOALS["console_cpu_percent_of_one_core"],
        "recorder": recorder_cpu is not None and recorder_cpu <= GOALS["recorder_cpu_percent_of_one_core"],
        "recorder_with_console_attached": (recorder_cpu_with_console is not None
                                           and recorder_cpu_with_console <= GOALS["recorder_cpu_percent_of_one_core"]),
    }
    rerun = "python benchmarks/watch_cost.py"
    if (args.seconds, args.rounds, args.warmup_s) != (60.0, 2, 6.0):
        rerun += f" --seconds {args.seconds:g} --rounds {args.rounds} --warmup-s {args.warmup_s:g}"
    result = {
        "benchmark": "watch_cost",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "rerun": rerun,
        "workload": f"benchmarks/paced_workload.py --seconds {args.seconds:g}: eager torch CPU, Linear(4, 1), SGD, "
                    "batch 8, fixed sleep to ~20 ms a step (~50 steps/s), a log line every 10 steps",
        "arms": {"baseline": "python paced_workload.py, stdout/stderr to files",
                 "console": f"neurondesk run --detach --price-per-hour 1 + neurondesk attach RUN in a {COLS}x{ROWS} "
                            "pty (TERM=xterm-256color), drained continuously",
                 "recorder": "neurondesk run --detach --price-per-hour 1, no viewer"},
        "rounds": args.rounds,
        "order": "A B C then C B A, alternating (A = baseline, B = console, C = recorder)",
        "seconds_per_arm": args.seconds,
        "measured_from_s": args.warmup_s,
        "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(),
                    "platform": platform.platform(), "load_avg_at_start": load_start, "load_avg_at_end": load_end},
        "goals": GOALS,
        "goals_met": goals_met,
        "medians": medians,
        "per_round": rounds,
        "notes": "CPU % of one core = (user + system CPU seconds of the process, all its threads) / wall "
                 "seconds, from the warm-up's end to the workload's exit, sampled with psutil every second; the "
                 "recorder's figure excludes its child (the workload). steps_per_s is the workload's own count "
                 "after its first 3 s; the pace is a fixed sleep, so time taken from the loop lowers it. "
                 "machine_busy_percent_of_all_cores is the whole machine over the arm (the benchmark itself, "
                 "the workload and anything else running); load averages in machine and per round.",
    }
    try:
        import textual

        result["machine"]["textual"] = textual.__version__
    except (ImportError, AttributeError):
        pass
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"medians": medians, "goals_met": goals_met}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
