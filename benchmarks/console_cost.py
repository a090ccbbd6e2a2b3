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

from neurondesk.core import device_events as dev  # noqa: E402
from neurondesk.core import events as ev  # noqa: E402
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120.0, help="real-time replay length (default 120)")
    ap.add_argument("--stress-seconds", type=float, default=120.0,
                    help="then a x20 replay (1,000 steps/s) this long, for RSS over many steps (0: skip)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
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
