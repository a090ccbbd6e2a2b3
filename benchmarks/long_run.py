"""Runs of days: does an answer still come in about a second, does the journal stay small, does
memory stay flat? (issue 21, items 3-6a)

For each size (recorded steps) and rank count, a run is recorded through the real recorder code
path: a ``Recorder`` (no workload process: what the probe sends, byte for byte, and the
workload's own log lines go into its queue and through ``pump``: probe decoding, the output
parsers, the journal writer with its segment rotation and compression, the reducer, the
checkpoints). What the probe sends (--wire steps, the default): the first three steps, which
compile, as `compile` and `step` messages; then each rank's ordinary steps coalesced into one
`steps` message per FLUSH_S (0.05 s) of recorded time, rendered by the probe's own
``StepColumns`` (batch.py, imported from neurondesk/probe/bootstrap), as its transport sends them
(at each send, at most MAX_STEPS a message): 2.5 steps a message at the default 50 steps/s
(--steps-per-s 200: 10, 2000: 100). --wire step: one `step` line per step, the wire form before
batching, for comparison. A loss line every 100 steps on stdout. The recorder holds its run
folder's lock while the readers are timed, so the run is live, as on day three of a training job:

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
    .venv/bin/python benchmarks/long_run.py --steps 10000000 --ranks 1 --no-baseline --add
    .venv/bin/python benchmarks/long_run.py --steps 10000,1000000 --ranks 1 --steps-per-s 2000 --no-baseline --add
    .venv/bin/python benchmarks/long_run.py --steps 1000000 --ranks 1 --wire step --no-baseline --add

Results: benchmarks/results/long_run.json (the README's "Long runs" section quotes them), with
--add merged into the rows already there: ``rows`` (the batched wire form), ``rows_step_wire``
(--wire step) and ``rows_per_step_wire`` (rows measured before the probe batched steps, kept).
Each row names the commit of the neurondesk it measured.

A checkpoint is only used by the reducer code that wrote it (a fingerprint of neurondesk/core's
sources): an edit of neurondesk/core while the benchmark runs sends the readers back to the whole
journal; each `summary` is checked to have used its checkpoint (no "checkpoint not used" line),
and a row where one did not fails. In a tree others are editing, run it from a snapshot of a
commit (docs/long-runs.md says how: a `git worktree` of the commit, this script run from there;
the recorder and every reader import neurondesk from the script's own tree, checked in the
recorder at each row). ``reduce_s``: the reduction alone (``state_from_run_dir`` in a process that has
imported everything already), the part that could grow with the run.
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

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
PY = sys.executable
LOG_EVERY = 100  # the workload prints a loss line every 100 steps (rank 0)


def _vm_hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _probe_module(name: str):
    """A module of the probe (neurondesk/probe/bootstrap/_neurondesk_probe), imported the way the
    workload imports it: the bootstrap folder on sys.path (it is not a package of neurondesk)."""
    import importlib
    sys.path.insert(0, str(BOOTSTRAP))
    try:
        return importlib.import_module(f"_neurondesk_probe.{name}")
    finally:
        sys.path.remove(str(BOOTSTRAP))


def generate(run_dir: Path, steps: int, ranks: int, wire: str = "steps", steps_per_s: float = 50.0,
             seed: int = 1) -> None:
    """(Subprocess.) Record a run of ``steps`` steps on ``ranks`` ranks through the recorder, then
    stay live (lock held) until stdin closes; then finish the run as the recorder does.

    ``wire``: "steps", what the probe sends now: the compile steps (step < 3) as `step` lines, then
    the ordinary steps of each rank coalesced into `steps` messages rendered by the probe's own
    StepColumns, one per FLUSH_S (0.05 s) of recorded time (the probe's send cadence: its flusher
    thread and its step-boundary check), at most MAX_STEPS a message; "step": one `step` line per
    step, the wire form before batching, for comparison."""
    from neurondesk.collectors.workload import RawOutput, RawProbe
    from neurondesk.core.events import run_events as ev
    from neurondesk.recorder.options import RunOptions
    from neurondesk.recorder.recorder import Recorder
    from neurondesk.store.liveness import RecorderLock
    from neurondesk.store.rundir import RunPaths

    batch = _probe_module("batch")
    flush_s = _probe_module("transport").FLUSH_S
    step_s = 1.0 / steps_per_s
    rnd = random.Random(seed)
    paths = RunPaths(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    rec = Recorder(["python", "train.py"], RunOptions(instance_type="trn1.32xlarge", price_per_hour=21.5,
                                                        telemetry=False), paths)
    rec.lock = RecorderLock(run_dir)
    rec.run_journal.open()
    t0 = float(int(time.time() - steps * step_s - 60))  # a whole second: the same send periods each time
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
    # far faster than it ran, and a real recorder sees 10 s pass every 10 s of recorded steps
    rec.run_journal.checkpoints.clock = lambda: t
    # what each rank's probe holds: the columns of its open batch (samples, tokens, executions and
    # pre-sync time present, one input shape: an XLA training step), closed at the next send
    shape_of, shapes = (True, True, True, True, False), [[8, 512]]  # (samples, tokens, executions, presync, phases)
    cols = [batch.StepColumns() for _ in pids]
    window = int(t / flush_s)  # the send cadence's current period, on the recorded clock
    messages = batches = 0
    last_pump = t

    def close_batches(at: float) -> None:
        nonlocal messages, batches
        for c, pid in zip(cols, pids, strict=True):
            if c.n:
                q.put(RawProbe(at, c.render(pid, 0)))
                messages += 1
                batches += 1

    started = time.perf_counter()
    cpu0 = time.process_time()
    for step in range(steps):
        if wire == "steps" and int(t / flush_s) != window:  # a send: the open batches go
            window = int(t / flush_s)
            close_batches(window * flush_s)
        for r, pid in enumerate(pids):
            d = step_s * (1 + 0.05 * rnd.random())
            wait = 0.0005 * rnd.random()
            ts = t + r * 1e-4
            if step < 3 or wire == "step":
                if step < 3:  # the compile wall of the first steps (a compile message closes a batch)
                    q.put(RawProbe(t, (f'{{"kind":"compile","t":{t:.6f},"source":"probe","step":{step},'
                                       f'"duration_s":{40.0 + r:.6f},"graph_hash":"g{step}","pid":{pid}}}').encode()))
                    messages += 1
                line = (f'{{"kind":"step","t":{ts:.6f},"step":{step},"duration_s":{d:.9f},'
                        f'"data_wait_s":{wait:.9f},"compiles":{1 if step < 3 else 0},"samples":8,"tokens":4096,'
                        f'"input_shapes":[[8,512]],"executions":1,"presync_s":{d * 0.4:.9f},"pid":{pid}}}')
                q.put(RawProbe(t, line.encode()))
                messages += 1
            else:
                c = cols[r]
                if not (c.n and c.fits(step, shape_of, shapes)):  # a new batch, or MAX_STEPS reached
                    if c.n:
                        q.put(RawProbe(t, c.render(pid, 0)))
                        messages += 1
                        batches += 1
                    c.start(step, shape_of, shapes)
                c.add(ts, d, wait, 8, 4096, 1, d * 0.4)
        if step % LOG_EVERY == 0:
            q.put(RawOutput(t, "stdout", f"step {step} loss {2.0 / (1 + step / 1000):.4f}"))
        t += step_s
        # as a live recorder takes its queue in: at least every 0.1 s (its pump's wait), sooner when busy
        if t - last_pump >= 0.1 or q.qsize() >= 200:
            last_pump = t
            while rec.pump(timeout=0):
                pass
    close_batches(t)  # the probe's flush at exit
    while rec.pump(timeout=0):
        pass
    rec.flush()
    gen_s = time.perf_counter() - started
    out = {"generate_s": round(gen_s, 2), "generate_cpu_s": round(time.process_time() - cpu0, 2),
           "wire": wire, "steps_per_s": steps_per_s, "probe_messages": messages, "steps_batches": batches,
           "steps_per_batch": round((steps - 3) * ranks / batches, 2) if batches else None,
           "events": rec.state.event_count, "steps_done": rec.state.steps_done,
           "recorder_peak_rss": _vm_hwm(), "checkpoints_written": rec.run_journal.checkpoints.written,
           "checkpoint_bytes": rec.run_journal.checkpoints.bytes, "segments_closed": rec.run_journal.writer.rotations,
           "rotation_problem": rec.run_journal.writer.rotation_problem,
           "neurondesk_from": str(Path(sys.modules["neurondesk"].__file__).resolve().parent.parent)}
    print(json.dumps(out), flush=True)
    sys.stdin.read()  # live until the benchmark is done reading
    rec.done = True  # no workload to wait for: close the journal as finish() does
    rec.run_journal.closed = True
    rec.run_journal.close()


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
from neurondesk.sources.rebuild import state_from_run_dir
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


def one(steps: int, ranks: int, rounds: int, baseline: bool, wire: str = "steps", steps_per_s: float = 50.0) -> dict:
    root = Path(tempfile.mkdtemp(prefix="nd-longrun-"))
    env = dict(os.environ, NEURONDESK_HOME=str(root), PYTHONPATH=str(REPO))
    run_dir = root / "runs" / f"20260101-000000-{steps:x}{ranks}"
    gen = subprocess.Popen([PY, __file__, "_generate", str(run_dir), str(steps), str(ranks), wire, str(steps_per_s)],
                           env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO)
    try:
        info = json.loads(gen.stdout.readline())
        # the neurondesk measured is this script's tree (a snapshot, not an editable install of another)
        assert info.pop("neurondesk_from") == str(REPO), "neurondesk was not imported from " + str(REPO)
        row = {"steps": steps, "ranks": ranks, "commit": os.environ.get("LONG_RUN_COMMIT") or _commit(), **info}
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
        generate(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], float(sys.argv[6]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default="10000,1000000", help="comma-separated run lengths")
    ap.add_argument("--ranks", default="1,8", help="comma-separated rank counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wire", choices=("steps", "step"), default="steps",
                    help="steps: what the probe sends (ordinary steps coalesced into `steps` messages, one per "
                         "0.05 s a rank); step: one `step` line per step (the wire form before batching)")
    ap.add_argument("--steps-per-s", type=float, default=50.0,
                    help="the recorded job's step rate (sets the recorded clock, so the steps a batch holds)")
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
            row = one(steps, ranks, args.rounds, baseline, args.wire, args.steps_per_s)
            print(json.dumps(row), flush=True)
            rows.append(row)
    commands = ["python benchmarks/long_run.py " + " ".join(sys.argv[1:])]

    def key(r: dict) -> tuple:  # the rows measured before batching have no "wire" (one step line a step, 50/s)
        return r["steps"], r["ranks"], r.get("wire"), r.get("steps_per_s", 50.0)

    if args.add and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text())
        done = {key(r) for r in rows}
        kept = old["rows"] + old.get("rows_step_wire", []) + old.get("rows_per_step_wire", [])
        rows = [r for r in kept if key(r) not in done] + rows
        commands = [c for c in old.get("commands", [old.get("command")]) if c] + commands
    rows.sort(key=lambda r: (str(r.get("wire")), r.get("steps_per_s", 50.0), r["ranks"], r["steps"]))

    def ratios_of(rows: list[dict]) -> dict:
        ratios = {}
        for group in sorted({key(r)[1:] for r in rows}):
            ranks, wire, rate = group
            mine = {r["steps"]: r for r in rows if key(r)[1:] == group}
            small, big = mine[min(mine)], mine[max(mine)]
            if small is big:
                continue
            name = f"{ranks}_rank{'s' if ranks > 1 else ''}_{max(mine)}_vs_{min(mine)}"
            if rate != 50.0:
                name += f"_at_{rate:g}_steps_per_s"
            ratios[name] = {k: round(big[k] / small[k], 2) for k in ("ls_s", "attach_s", "summary_s", "reduce_s")} | {
                "recorder_rss_delta_mib": round((big["recorder_peak_rss"] - small["recorder_peak_rss"]) / 2**20, 1),
                "viewer_rss_delta_mib": round((big["reader_peak_rss"]["attach"] - small["reader_peak_rss"]["attach"])
                                              / 2**20, 1)}
        return ratios

    lists = {wire: [r for r in rows if r.get("wire") == wire] for wire in ("steps", "step", None)}
    result = {
        "what": "issue 21: ls / attach / summary of a live run, recorder and reader RSS, journal bytes per step, "
                "at several run lengths, recorded through the recorder's own code path (no workload process); "
                "rows: the probe's wire form (ordinary steps coalesced into `steps` messages, one per 0.05 s a "
                "rank); rows_step_wire: one `step` line per step (--wire step), measured beside them; "
                "rows_per_step_wire: the rows measured before the probe batched steps, kept as they were",
        "commands": commands,
        "commit": "per row (each row names the commit of the neurondesk it was measured with)",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "goals": {"reads": "about the same time at 1M/10M steps as at 10k", "journal_bytes_per_step": 64,
                  "rss_delta_mib": 30},
        "rows": lists["steps"], "ratios": ratios_of(lists["steps"]),
        "rows_step_wire": lists["step"], "ratios_step_wire": ratios_of(lists["step"]),
        "rows_per_step_wire": lists[None], "ratios_per_step_wire": ratios_of(lists[None]),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["ratios"], indent=2))


if __name__ == "__main__":
    main()
