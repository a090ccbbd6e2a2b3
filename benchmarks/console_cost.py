"""Console cost: CPU and RSS of `neurondesk replay` in a real pseudo-terminal, and the time from
the command to its first frame.

The journal it replays is built from a real recorded demo run (tests/data/journals/plain: its
run_started, process, device, compile and output events) re-timed to a fast trn-class run:
50 steps/s, a 6 s first compile, a NeuronSample for 32 NeuronCores (trn1.32xlarge) plus host
(128 vCPU) and process-tree samples at 1 Hz, a log line every 10 steps. The console replays it
at speed 1 (real time) in a 160x48 pty; this script reads the pty (as a terminal would) and
samples the console process with psutil every second.

    python benchmarks/console_cost.py                 # 120 s at 50 steps/s, then 120 s at x20
    python benchmarks/console_cost.py --seconds 30 --stress-seconds 0

Goals (issue 3): <= 3% of one core at 50 steps/s, RSS flat, first frame within 1 s.
Results: benchmarks/results/console_cost.json.

``--live-minutes M`` measures instead the console of a live run (issue 21, item 6b: the soak's
console): `neurondesk run -- benchmarks/paced_workload.py --step-s 0.005` (about 200 steps/s, a
log line every 10 steps) in a 160x48 pty, then the same console on an idle run (a workload that
sleeps: no steps, no output; the recorder's 1 Hz host and process samples still arrive), M
minutes each after a 15 s start, as CPU seconds per minute of the console process (utime + stime
from /proc). ``--baseline REV`` runs every case twice, interleaved: with this tree, and with this
tree whose neurondesk/views/console/ is REV's (both copied to a temporary folder first, so an
edit elsewhere during the benchmark changes neither arm).

    python benchmarks/console_cost.py --live-minutes 3 --baseline d5fe032
    # results: benchmarks/results/console_cost.json, key "live" (the replay figures are kept)
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
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from neurondesk.core.events import device_events as dev  # noqa: E402
from neurondesk.core.events import run_events as ev  # noqa: E402
from neurondesk.store.journal import JournalWriter, read_journal  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "console_cost.json"
SOURCE = REPO / "tests" / "data" / "journals" / "plain"
COLS, ROWS = 160, 48
CORES, VCPUS = 32, 128


def build_journal(path: Path, seconds: float, steps_per_s: float = 50.0) -> int:
    """Write the benchmark journal; returns its event count."""
    real, _ = read_journal(SOURCE / "events.jsonl")
    started = next(e for e in real if e.kind == "run_started")
    attached = next(e for e in real if e.kind == "process_attached")
    device = next(e for e in real if e.kind == "device_seen")
    compiles = [e for e in real if e.kind == "compile"]
    t0 = 1_800_000_000.0
    pid = attached.pid
    n = 0
    steps = int(seconds * steps_per_s)
    with JournalWriter(path) as w:
        def put(e):
            nonlocal n
            w.write(e)
            n += 1

        put(ev.RunStarted(t=t0, run_id="console-bench", command=started.command, cwd=started.cwd,
                          instance_type="trn1.32xlarge", price_per_hour=21.50,
                          price_source="benchmark", steps_requested=steps))
        put(ev.ProcessAttached(t=t0 + 0.5, pid=pid, python=attached.python, argv=attached.argv,
                               torch_version=attached.torch_version,
                               torch_xla_version=attached.torch_xla_version))
        put(ev.DeviceSeen(t=t0 + 1.0, pid=pid, device_kind="neuron", device_name="trn1 NeuronCore-v2",
                          precision=device.precision))
        put(ev.CompileStarted(t=t0 + 1.0, source="probe", pid=pid, step=0))
        first = compiles[0]
        put(ev.CompileFinished(t=t0 + 7.0, source="probe", duration_s=6.0, pid=pid, step=0,
                               graph_hash=first.graph_hash, cache="miss", trigger=first.trigger,
                               point=first.point, location=first.location, input_shapes=first.input_shapes,
                               reason=first.reason, frames=list(first.frames)))
        t = t0 + 7.0
        next_sample = t0 + 1.0
        dt = 1.0 / steps_per_s
        for step in range(steps):
            t += dt
            while next_sample <= t:
                put(_neuron(next_sample, step))
                put(_host(next_sample, step))
                put(_tree(next_sample, pid))
                next_sample += 1.0
            put(ev.StepEnded(t=t, pid=pid, step=step, duration_s=dt * (1 + 0.05 * ((step * 7) % 5 - 2) / 2),
                             samples=8, tokens=512, data_wait_s=dt * 0.02, executions=1))
            if step % 10 == 0:
                put(ev.OutputLine(t=t, stream="stdout", text=f"step {step} loss {7.0 / (1 + step / 500):.4f}"))
                put(ev.LossReported(t=t, value=7.0 / (1 + step / 500), step=step))
        put(ev.RunFinished(t=t + 0.1, exit_code=0))
    return n


def _neuron(t: float, step: int) -> dev.NeuronSample:
    cores = [dev.NeuronCoreSample(core=i, utilization=60.0 + (i * 13 + step) % 35,
                                  memory={"tensors": 3 << 30, "model_code": 200 << 20, "runtime": 64 << 20},
                                  memory_total=16 << 30, owner_pid=1, owner_tag="bench") for i in range(CORES)]
    return dev.NeuronSample(t=t, cores=cores, executions_completed=step)


def _host(t: float, step: int) -> dev.HostSample:
    per = [float((i * 7 + step) % 60) for i in range(VCPUS)]
    return dev.HostSample(t=t, cpu_percent=30.0, per_cpu_percent=per, memory_total=512 << 30,
                          memory_used=(120 << 30) + step * 4096, memory_available=392 << 30)


def _tree(t: float, pid: int) -> dev.ProcessTreeSample:
    procs = [dev.ProcessInfo(pid=pid, ppid=1, name="python", role="main", cpu_percent=101.0,
                             cpu_time_s=t % 1000, rss=6 << 30, threads=40, elapsed_s=10.0)]
    procs += [dev.ProcessInfo(pid=pid + i, ppid=pid, name="python", role="dataloader", cpu_percent=20.0,
                              cpu_time_s=1.0, rss=1 << 30, threads=2, elapsed_s=9.0) for i in range(1, 5)]
    return dev.ProcessTreeSample(t=t, root_pid=pid, processes=procs, total_cpu_percent=181.0,
                                 total_rss=10 << 30, dataloader_workers=4, dataloader_cpu_percent=80.0)


class PtyConsole:
    """`neurondesk replay` in a pseudo-terminal of COLS x ROWS; its output is read and dropped,
    as a terminal would, and the time of the first frame is noted."""

    def __init__(self, run_dir: Path, speed: float) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor",
                   PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.command = [sys.executable, "-m", "neurondesk.cli", "replay", str(run_dir), "--speed", str(speed)]
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
                # the first full frame has both the header and the footer's key hints
                if b"neurondesk" in seen and b"Export" in seen:
                    self.first_frame_s = time.monotonic() - self.t_start

    def press(self, key: bytes) -> None:
        os.write(self.master, key)

    def close(self, timeout: float = 10.0) -> int | None:
        self.press(b"q")
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        self._stop.set()
        self._thread.join(2)
        os.close(self.master)
        return code


def measure(run_dir: Path, speed: float, seconds: float, warmup_s: float = 5.0) -> dict:
    con = PtyConsole(run_dir, speed)
    p = psutil.Process(con.proc.pid)
    samples = []
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end and con.proc.poll() is None:
        time.sleep(1.0)
        ct = p.cpu_times()
        samples.append((time.monotonic() - con.t_start, ct.user + ct.system, p.memory_info().rss))
    code = con.close()
    steady = [s for s in samples if s[0] >= warmup_s]
    cpu = None
    if len(steady) >= 2:
        cpu = 100.0 * (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
    rss = [s[2] for s in steady] or [s[2] for s in samples]

    def at(frac: float) -> float:
        return round(rss[min(len(rss) - 1, int(frac * (len(rss) - 1)))] / 2**20, 1)

    return {
        "command": " ".join(con.command),
        "speed": speed,
        "seconds": round(samples[-1][0], 1) if samples else None,
        "first_frame_s": None if con.first_frame_s is None else round(con.first_frame_s, 3),
        "cpu_percent_of_one_core": None if cpu is None else round(cpu, 2),
        "cpu_measured_from_s": warmup_s,
        "rss_mib": {"at_0%": at(0), "at_25%": at(0.25), "at_50%": at(0.5), "at_75%": at(0.75),
                    "at_100%": at(1), "max": round(max(rss) / 2**20, 1),
                    "growth_second_half": round(at(1) - at(0.5), 1)},
        "terminal_bytes_per_s": round(con.bytes / samples[-1][0], 0) if samples else None,
        "exit_code": code,
    }


LIVE_WARMUP_S = 15.0  # the console's start, the recorder's, the workload's import of torch


def _cpu_s(pid: int) -> float | None:
    """utime + stime of ``pid`` in seconds, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_copy(dest: Path, console_rev: str | None) -> Path:
    """This checkout's neurondesk package under ``dest`` (an importable root); with ``console_rev``,
    its views/console/ replaced by that revision's."""
    import shutil

    shutil.copytree(REPO / "neurondesk", dest / "neurondesk", ignore=shutil.ignore_patterns("__pycache__"))
    if console_rev is not None:
        console = dest / "neurondesk" / "views" / "console"
        shutil.rmtree(console)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", console_rev, "neurondesk/views/console"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def measure_live(root: Path, home: Path, run_dir: Path, workload: str, minutes: float) -> dict:
    """The console of `neurondesk run -- WORKLOAD` (neurondesk imported from ``root``) in a pty:
    its CPU over ``minutes`` after LIVE_WARMUP_S, then SIGTERM (it stops the workload and quits)."""
    seconds = minutes * 60
    if workload == "paced":
        command = [sys.executable, str(REPO / "benchmarks" / "paced_workload.py"), "--seconds",
                   str(seconds + LIVE_WARMUP_S + 30), "--step-s", "0.005"]
    else:
        command = [sys.executable, "-c", f"import time; time.sleep({seconds + LIVE_WARMUP_S + 30})"]
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(root),
               NEURONDESK_HOME=str(home))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--run-dir", str(run_dir), "--",
                             *command], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=str(root),
                            start_new_session=True)
    os.close(slave)
    got = {"bytes": 0}

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            got["bytes"] += len(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        time.sleep(LIVE_WARMUP_S)
        t0, c0, b0 = time.monotonic(), _cpu_s(proc.pid), got["bytes"]
        time.sleep(seconds)
        t1, c1, b1 = time.monotonic(), _cpu_s(proc.pid), got["bytes"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        reader.join(2)
        os.close(master)
    if c0 is None or c1 is None:
        return {"error": f"the console exited early (exit {code})"}
    steps = None
    for line in (run_dir / "stdout.log").read_text(errors="replace").splitlines() if (
            run_dir / "stdout.log").exists() else []:
        if line.startswith("step "):
            steps = int(line.split()[1])
    return {"cpu_s_per_minute": round((c1 - c0) / (t1 - t0) * 60, 3),
            "cpu_percent_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 2),
            "measured_s": round(t1 - t0, 1), "terminal_bytes_per_s": round((b1 - b0) / (t1 - t0)),
            "workload_steps_logged": steps, "exit_code": code}


def live(minutes: float, baseline: str | None, rounds: int) -> dict:
    """Both workloads, each arm, ``rounds`` interleaved rounds; medians per arm and workload."""
    import statistics

    tmp = Path(tempfile.mkdtemp(prefix="nd-console-live-"))
    try:
        arms = {"this_tree": tree_copy(tmp / "this", None)}
        if baseline is not None:
            arms = {"baseline": tree_copy(tmp / "baseline", baseline), **arms}
        runs: dict[str, dict[str, list[dict]]] = {w: {a: [] for a in arms} for w in ("paced_200_steps_per_s", "idle")}
        n = 0
        for _ in range(rounds):
            for workload, key in (("paced", "paced_200_steps_per_s"), ("idle", "idle")):
                for arm, root in arms.items():
                    n += 1
                    got = measure_live(root, tmp / "home", tmp / f"run-{n}", workload, minutes)
                    print(json.dumps({"workload": key, "arm": arm, **got}), flush=True)
                    runs[key][arm].append(got)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    out: dict = {}
    for key, by_arm in runs.items():
        out[key] = {}
        for arm, rows in by_arm.items():
            ok = [r for r in rows if "error" not in r]
            out[key][arm] = {
                "cpu_s_per_minute": round(statistics.median(r["cpu_s_per_minute"] for r in ok), 3) if ok else None,
                "cpu_percent_of_one_core": round(statistics.median(r["cpu_percent_of_one_core"] for r in ok), 2)
                if ok else None,
                "runs": rows}
    return out


def main_live(args) -> int:
    result = json.loads(args.out.read_text()) if args.out.exists() else {"benchmark": "console_cost"}
    result["live"] = {
        "rerun": f"python benchmarks/console_cost.py --live-minutes {args.live_minutes:g}"
                 + (f" --baseline {args.baseline}" if args.baseline else "")
                 + (f" --rounds {args.rounds}" if args.rounds != 1 else ""),
        "what": "the console of `neurondesk run -- python benchmarks/paced_workload.py --step-s 0.005` (about 200 "
                "steps/s, a log line every 10 steps; the soak's workload) and of an idle run (the workload "
                "sleeps), in a pty 160x48, TERM=xterm-256color; CPU seconds per minute of the console process "
                f"(utime + stime from /proc) over {args.live_minutes:g} minutes after a {LIVE_WARMUP_S:g} s start",
        "baseline": None if args.baseline is None else
        f"this tree with neurondesk/views/console/ from {args.baseline} "
        f"({subprocess.run(['git', '-C', str(REPO), 'rev-parse', '--short', args.baseline], capture_output=True, text=True).stdout.strip()})",
        "this_tree": subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                                    text=True).stdout.strip(),
        "goal": "console <= 2% of one core (issue 21, item 6b)",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_end": None},
    }
    result["live"].update(live(args.live_minutes, args.baseline, args.rounds))
    result["live"]["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120.0, help="real-time replay length (default 120)")
    ap.add_argument("--stress-seconds", type=float, default=120.0,
                    help="then a x20 replay (1,000 steps/s) this long, for RSS over many steps (0: skip)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--live-minutes", type=float, default=None,
                    help="measure a live run's console instead (200 steps/s, then idle), this long each")
    ap.add_argument("--baseline", default=None, help="with --live-minutes: also this revision's console, interleaved")
    ap.add_argument("--rounds", type=int, default=1, help="with --live-minutes: interleaved rounds (default 1)")
    args = ap.parse_args()
    if args.live_minutes is not None:
        return main_live(args)
    with tempfile.TemporaryDirectory(prefix="nd-bench-") as tmp:
        run = Path(tmp) / "bench-run"
        run.mkdir()
        total = args.seconds + 10 + args.stress_seconds * 20
        n = build_journal(run / "events.jsonl", total)
        print(f"journal: {n:,} events, {(run / 'events.jsonl').stat().st_size / 2**20:.1f} MiB", flush=True)
        realtime = measure(run, 1.0, args.seconds)
        print(json.dumps(realtime, indent=2), flush=True)
        stress = measure(run, 20.0, args.stress_seconds) if args.stress_seconds > 0 else None
        if stress:
            print(json.dumps(stress, indent=2), flush=True)
    result = {
        "benchmark": "console_cost",
        "rerun": "python benchmarks/console_cost.py" + (
            f" --seconds {args.seconds:g} --stress-seconds {args.stress_seconds:g}"
            if (args.seconds, args.stress_seconds) != (120.0, 120.0) else ""),
        "workload": f"journal re-timed from tests/data/journals/plain: 50 steps/s, NeuronSample for {CORES} "
                    f"cores + host ({VCPUS} vCPU) + process tree at 1 Hz, a log line every 10 steps",
        "terminal": f"pty {COLS}x{ROWS}, TERM=xterm-256color",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "goals": {"cpu_percent_of_one_core": 3.0, "first_frame_s": 1.0, "rss": "flat"},
        "bounded_buffers": "RunState: 2,000 steps of history, 5,000 output lines; log view: 5,000 lines; "
                           "compile table: 500 rows; the x20 run fills them all within its first minute",
        "notes": "CPU is the console process's user+system time over the replay after its first 5 s, in a "
                 "real pty that this script drains like a terminal. RSS rises while the bounded buffers fill "
                 "(the log's 5,000 lines take ~17 min at 50 steps/s, a minute at x20) and then stays within a "
                 "few MiB; what still grows is RunState.steady_times (8 bytes per steady step, kept for an "
                 "exact median: 8 MB per million steps). Python object counts are flat once the buffers are "
                 "full (gc census, 40 s apart at x20). Measured on a shared 2-core machine; load average "
                 "in machine.load_avg_at_end.",
        "realtime_50_steps_per_s": realtime,
        "stress_1000_steps_per_s": stress,
    }
    try:
        import textual

        result["machine"]["textual"] = textual.__version__
    except (ImportError, AttributeError):
        pass
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
