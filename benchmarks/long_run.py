"""Runs of days: does an answer still come in about a second, does the journal stay small, does
memory stay flat? (issue 21, items 3-6a)

For each size (recorded steps) and rank count, a run is recorded through the real recorder code
path: a ``Recorder`` (no workload process: the probe's step lines, byte for byte as the probe
formats them, and the workload's own log lines go into its queue and through ``pump``: probe
decoding, the output parsers, the journal writer with its segment rotation and compression, the
reducer, the checkpoints). The recorder holds its run folder's lock while the readers are timed,
so the run is live, as on day three of a training job:

    ls        `neurondesk ls` (a subprocess, startup included) until it prints
    attach    a viewer process (FollowSource, what `attach` runs under the console or --headless)
              until its state shows the run's current step
    summary   `neurondesk summary DIR --format json`
    peak RSS  of the recorder (the generating process: VmHWM) and of each reader (wait4)
    bytes     the journal on disk (segments + live file) per recorded step, checkpoints apart

Each reader is timed --rounds times (median kept, all listed). One reference figure is taken the
old way, the whole journal reduced without a checkpoint (`summary` on a copy of the journal alone),
for the largest size.

    .venv/bin/python benchmarks/long_run.py                      # 10k and 1M steps, 1 and 8 ranks
    .venv/bin/python benchmarks/long_run.py --steps 10000,1000000,10000000 --ranks 1

Results: benchmarks/results/long_run.json (the README's "Long runs" section quotes them).

A checkpoint is only used by the reducer code that wrote it (a fingerprint of neurondesk/core's
sources): an edit of neurondesk/core while the benchmark runs sends the readers back to the whole
journal; each `summary` is checked to have used its checkpoint (no "checkpoint not used" line),
and a row where one did not fails. In a tree others are editing, run it from a snapshot installed
in a venv of its own (the README's "Long runs" says how): an editable install reads the live tree. ``reduce_s``: the reduction alone (``state_from_run_dir`` in a
process that has imported everything already), the part that could grow with the run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PY = sys.executable
STEP_S = 0.02  # 50 steps/s of recorded time
LOG_EVERY = 100  # the workload prints a loss line every 100 steps (rank 0)


def _vm_hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def generate(run_dir: Path, steps: int, ranks: int, seed: int = 1) -> None:
    """(Subprocess.) Record a run of ``steps`` steps on ``ranks`` ranks through the recorder, then
    stay live (lock held) until stdin closes; then finish the run as the recorder does."""
    from neurondesk.collectors.workload import RawOutput, RawProbe
    from neurondesk.core import events as ev
    from neurondesk.recorder.options import RunOptions
    from neurondesk.recorder.recorder import Recorder
    from neurondesk.store.journal import JournalWriter
    from neurondesk.store.liveness import RecorderLock
    from neurondesk.store.rundir import RunPaths

    rnd = random.Random(seed)
    paths = RunPaths(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    rec = Recorder(["python", "train.py"], RunOptions(instance_type="trn1.32xlarge", price_per_hour=21.5,
                                                        telemetry=False), paths)
    rec.lock = RecorderLock(run_dir)
    rec.journal = JournalWriter(paths.events)
    t0 = time.time() - steps * STEP_S - 60
    rec.record(ev.RunStarted(t=t0, run_id=run_dir.name, command=rec.command, instance_type="trn1.32xlarge",
                             price_per_hour=21.5, steps_requested=steps))
    rec.flush()
    pids = [40000 + r for r in range(ranks)]
    q = rec.queue
    for r, pid in enumerate(pids):
        q.put(RawProbe(t0, (f'{{"kind":"process_attached","t":{t0:.6f},"ppid":1,"rank":{r},"local_rank":{r},'
                            f'"world_size":{ranks},"python":"3.11","argv":["train.py"],"pid":{pid}}}').encode()))
    t = t0 + 1
    # the recorder's checkpoint cadence (every 10 s) on the recorded clock: this run is recorded
    # far faster than it ran, and a real recorder sees 10 s pass every 500 steps here
    rec.checkpoints.clock = lambda: t
    started = time.perf_counter()
    cpu0 = time.process_time()
    for step in range(steps):
        for r, pid in enumerate(pids):
            if step < 3:  # the compile wall of the first steps
                q.put(RawProbe(t, (f'{{"kind":"compile","t":{t:.6f},"source":"probe","step":{step},'
                                   f'"duration_s":{40.0 + r:.6f},"graph_hash":"g{step}","pid":{pid}}}').encode()))
            d = STEP_S * (1 + 0.05 * rnd.random())
            wait = 0.0005 * rnd.random()
            line = (f'{{"kind":"step","t":{t + r * 1e-4:.6f},"step":{step},"duration_s":{d:.9f},'
                    f'"data_wait_s":{wait:.9f},"compiles":{1 if step < 3 else 0},"samples":8,"tokens":4096,'
                    f'"input_shapes":[[8,512]],"executions":1,"presync_s":{d * 0.4:.9f},"pid":{pid}}}')
            q.put(RawProbe(t, line.encode()))
        if step % LOG_EVERY == 0:
            q.put(RawOutput(t, "stdout", f"step {step} loss {2.0 / (1 + step / 1000):.4f}"))
        t += STEP_S
        if q.qsize() >= 200:  # as often as a live recorder takes its queue in (every 0.1 s at 250 steps/s)
            while rec.pump(timeout=0):
                pass
    while rec.pump(timeout=0):
        pass
    rec.flush()
    gen_s = time.perf_counter() - started
    out = {"generate_s": round(gen_s, 2), "generate_cpu_s": round(time.process_time() - cpu0, 2),
           "events": rec.state.event_count, "steps_done": rec.state.steps_done,
           "recorder_peak_rss": _vm_hwm(), "checkpoints_written": rec.checkpoints.written,
           "checkpoint_bytes": rec.checkpoints.bytes, "segments_closed": rec.journal.rotations,
           "rotation_problem": rec.journal.rotation_problem}
    print(json.dumps(out), flush=True)
    sys.stdin.read()  # live until the benchmark is done reading
    rec.done = True  # no workload to wait for: close the journal as finish() would
    rec._close_journal()


ATTACH = """
import sys, time
t0 = time.perf_counter()
from neurondesk.sources.follow import FollowSource
src = FollowSource(sys.argv[1], attached=True)
want = int(sys.argv[2])
while src.state.steps_done < want:
    src.poll()
    if time.perf_counter() - t0 > 600:
        raise SystemExit("attach: the current step never showed")
print(src.state.steps_done, flush=True)
"""


def timed_rss(cmd: list[str], env: dict) -> tuple[float, int, str]:
    start = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {p.returncode}: {err.decode()[-2000:]}")
    if b"checkpoint not used" in err:
        raise RuntimeError(f"{' '.join(cmd[:4])} did not use the checkpoint: {err.decode()[-500:]}")
    return wall, usage.ru_maxrss * 1024, out.decode()


REDUCE = """
import sys, time
from pathlib import Path
from neurondesk.sources.replay import state_from_run_dir
t = time.perf_counter()
notes = []
state, _ = state_from_run_dir(Path(sys.argv[1]), notes=notes)
print(time.perf_counter() - t, state.steps_done, len(notes), flush=True)
"""


def journal_bytes(run_dir: Path) -> tuple[int, int]:
    j = c = 0
    for p in run_dir.iterdir():
        if p.name.startswith("events."):
            j += p.stat().st_size
        elif p.name.startswith("checkpoint."):
            c += p.stat().st_size
    return j, c


def one(steps: int, ranks: int, rounds: int, baseline: bool) -> dict:
    root = Path(tempfile.mkdtemp(prefix="nd-longrun-"))
    env = dict(os.environ, NEURONDESK_HOME=str(root), PYTHONPATH=str(REPO))
    run_dir = root / "runs" / f"20260101-000000-{steps:x}{ranks}"
    gen = subprocess.Popen([PY, __file__, "_generate", str(run_dir), str(steps), str(ranks)], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO)
    try:
        info = json.loads(gen.stdout.readline())
        row = {"steps": steps, "ranks": ranks, **info}
        nd = [PY, "-m", "neurondesk.cli"]  # the CLI of this interpreter's neurondesk (its console script's code)
        reads: dict[str, list] = {"ls": [], "attach": [], "summary": [], "reduce": []}
        rss: dict[str, int] = {}
        for _ in range(rounds):
            wall, peak, out = timed_rss(nd + ["ls"], env)
            assert run_dir.name in out, out
            reads["ls"].append(wall)
            rss["ls"] = max(rss.get("ls", 0), peak)
            wall, peak, out = timed_rss([PY, "-c", ATTACH, str(run_dir), str(info["steps_done"])], env)
            assert int(out.split()[0]) == info["steps_done"], out
            reads["attach"].append(wall)
            rss["attach"] = max(rss.get("attach", 0), peak)
            wall, peak, out = timed_rss(nd + ["summary", str(run_dir), "--format", "json"], env)
            s = json.loads(out)
            assert s["steps"] == info["steps_done"], (s["steps"], info["steps_done"])
            reads["summary"].append(wall)
            rss["summary"] = max(rss.get("summary", 0), peak)
            _, _, out = timed_rss([PY, "-c", REDUCE, str(run_dir)], env)
            took, done, notes = out.split()
            assert int(done) == info["steps_done"] and notes == "0", out
            reads["reduce"].append(float(took))
        jb, cb = journal_bytes(run_dir)
        row.update({
            "ls_s": round(statistics.median(reads["ls"]), 3),
            "attach_s": round(statistics.median(reads["attach"]), 3),
            "summary_s": round(statistics.median(reads["summary"]), 3),
            "reduce_s": round(statistics.median(reads["reduce"]), 4),
            "rounds": {k: [round(x, 3) for x in v] for k, v in reads.items()},
            "reader_peak_rss": rss,
            "journal_bytes": jb, "checkpoint_files_bytes": cb,
            "journal_bytes_per_step": round(jb / steps, 2),
            "journal_bytes_per_step_event": round(jb / (steps * ranks), 2),
            "summary_steady_median_ms": round(s["steady"]["step_time_s"] * 1000, 4)
            if s.get("steady", {}).get("step_time_s") else None,
        })
        if baseline:  # the whole journal, no checkpoint: what every reader did before
            bare = root / "runs" / "bare"
            bare.mkdir()
            for p in run_dir.iterdir():
                if p.name.startswith("events."):
                    shutil.copy(p, bare / p.name)
            wall, peak, out = timed_rss(nd + ["summary", str(bare), "--format", "json"], env)
            row["summary_without_checkpoint_s"] = round(wall, 2)
            row["summary_without_checkpoint_peak_rss"] = peak
            _, _, out = timed_rss([PY, "-c", REDUCE, str(bare)], env)
            row["reduce_without_checkpoint_s"] = round(float(out.split()[0]), 2)
        return row
    finally:
        gen.stdin.close()
        gen.wait(timeout=600)
        shutil.rmtree(root, ignore_errors=True)


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_generate":
        generate(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="10000,1000000", help="comma-separated run lengths")
    ap.add_argument("--ranks", default="1,8", help="comma-separated rank counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true", help="skip the whole-journal reference figure")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "long_run.json"))
    ap.add_argument("--add", action="store_true", help="keep the rows already in --out that this run does not measure")
    args = ap.parse_args()
    sizes = [int(x) for x in args.steps.split(",")]
    rank_counts = [int(x) for x in args.ranks.split(",")]
    rows = []
    for ranks in rank_counts:
        for steps in sizes:
            baseline = not args.no_baseline and steps == max(sizes) and ranks == rank_counts[0]
            row = one(steps, ranks, args.rounds, baseline)
            print(json.dumps(row), flush=True)
            rows.append(row)
    commands = ["python benchmarks/long_run.py " + " ".join(sys.argv[1:])]
    if args.add and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        done = {(r["steps"], r["ranks"]) for r in rows}
        rows = [r for r in old["rows"] if (r["steps"], r["ranks"]) not in done] + rows
        rows.sort(key=lambda r: (r["ranks"], r["steps"]))
        commands = [c for c in old.get("commands", [old.get("command")]) if c] + commands
    ratios = {}
    for ranks in sorted({r["ranks"] for r in rows}):
        mine = {r["steps"]: r for r in rows if r["ranks"] == ranks}
        small, big = mine[min(mine)], mine[max(mine)]
        if small is big:
            continue
        ratios[f"{ranks}_rank{'s' if ranks > 1 else ''}_{max(mine)}_vs_{min(mine)}"] = {
            k: round(big[k] / small[k], 2) for k in ("ls_s", "attach_s", "summary_s", "reduce_s")} | {
            "recorder_rss_delta_mib": round((big["recorder_peak_rss"] - small["recorder_peak_rss"]) / 2**20, 1),
            "viewer_rss_delta_mib": round((big["reader_peak_rss"]["attach"] - small["reader_peak_rss"]["attach"])
                                          / 2**20, 1)}
    result = {
        "what": "issue 21: ls / attach / summary of a live run, recorder and reader RSS, journal bytes per step, "
                "at several run lengths, recorded through the recorder's own code path (no workload process)",
        "commands": commands,
        "commit": os.environ.get("LONG_RUN_COMMIT") or _commit(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "goals": {"reads": "about the same time at 1M/10M steps as at 10k", "journal_bytes_per_step": 64,
                  "rss_delta_mib": 30},
        "rows": rows, "ratios": ratios,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(ratios, indent=2))


if __name__ == "__main__":
    main()
