"""Every rank of a trn1.32xlarge (issue 11): what watching a 32-rank job costs.

The stream: 32 ranks (torchrun-style, one process each, rank and local rank in their hello), each at
50 steps/s (1,600 step events/s) with its pre-sync time (rank 2 about 4 ms slower: a straggler),
every rank's first compiles (two graphs), a recompile on one rank every 20 s, a NeuronSample for 32
NeuronCores + a host sample (128 vCPU) + a process-tree sample (32 ranks) at 1 Hz, and a log line
every 10 steps. The baseline, in the same invocation: the same stream from one rank (50 steps/s).

1. Recorder (in this process, one thread, CPU time): each simulated second's probe lines are
   decoded (decode_probe_line), journaled (JournalWriter, a real file) and reduced (RunState.apply);
   telemetry is journaled and reduced (its collectors make events, no decoding); then
   RankReducer.stragglers() is called once, as a viewer would once a second. CPU share = CPU
   seconds / simulated seconds, stragglers() apart. RSS after each quarter of a long stream.
2. Console: the real app (`neurondesk replay RUN --speed 1`, the journal of that stream, real time)
   in a pseudo-terminal this script drains like a terminal (benchmarks/console_cost.PtyConsole);
   its CPU (user+system after its first 5 s) and RSS by psutil: at 160x48 (every panel and the
   Ranks row), at 80x24 on the Ranks tab and on the Overview tab, and the 1-rank baseline at 160x48.

    .venv/bin/python benchmarks/ranks_stream.py                    # about 3 minutes
    .venv/bin/python benchmarks/ranks_stream.py --sim-seconds 60 --console-seconds 15

Goals (issue 11): console <= 5% of a core, recorder <= 5%, memory flat.
Results: benchmarks/results/ranks_stream.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import console_cost  # noqa: E402

from neurondesk.collectors.probe_messages import decode_probe_line  # noqa: E402
from neurondesk.core.events import device_events as dev  # noqa: E402
from neurondesk.core.events import run_events as ev  # noqa: E402
from neurondesk.core.reduce.state import RunState  # noqa: E402
from neurondesk.store.journal import JournalWriter, encode_event  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "ranks_stream.json"
T0 = 1_800_000_000.0
PID0 = 40_000
STEPS_PER_S = 50
PRESYNC_S, STRAGGLER_EXTRA_S, STRAGGLER = 0.009, 0.004, 2
PROBE_KINDS = {"process_attached", "device_seen", "compile_started", "compile", "step"}


def stream(ranks: int, seconds: int):
    """Yield (second, [events]) for each simulated second: the hellos and first compiles in second 0."""
    dt = 1.0 / STEPS_PER_S
    pids = [PID0 + r for r in range(ranks)]
    first = [ev.RunStarted(t=T0, run_id=f"ranks-bench-{ranks}", instance_type="trn1.32xlarge",
                           command=["torchrun", "--nproc_per_node", str(ranks), "train.py"],
                           price_per_hour=21.50, price_source="benchmark", warmup_steps=5)]
    for r, pid in enumerate(pids):
        first.append(ev.ProcessAttached(t=T0 + 0.1, pid=pid, ppid=PID0 - 1, rank=r, local_rank=r, world_size=ranks,
                                        python="/venv/bin/python", argv=["train.py"], torch_version="2.9.0",
                                        torch_xla_version="2.9.0"))
        first.append(ev.DeviceSeen(t=T0 + 0.2, pid=pid, device_kind="neuron", device_name="trn1 NeuronCore-v2",
                                   precision="bf16"))
    step = 0
    for sec in range(seconds):
        out = first if sec == 0 else []
        base = T0 + 1.0 + sec
        out += [_neuron(base, step), _host(base, step), _tree(base, pids)]
        for _ in range(STEPS_PER_S):
            t = base + (step % STEPS_PER_S) * dt
            for r, pid in enumerate(pids):
                compiled = step in (0, 1) or (ranks > 1 and r == 7 and step % (20 * STEPS_PER_S) == 0 and step)
                if compiled:
                    out.append(ev.CompileStarted(t=t, source="probe", pid=pid, step=step))
                    out.append(ev.CompileFinished(t=t, source="probe", duration_s=0.5, pid=pid, step=step,
                                                  graph_hash=f"g{step % 2}", cache="hit", trigger="sync",
                                                  point="step", location="train.py:88", phase="train",
                                                  input_shapes=[[8, 512]]))
                pre = PRESYNC_S + (STRAGGLER_EXTRA_S if r == STRAGGLER and ranks > 1 else 0.0) + ((step + r) % 7) * 1e-4
                out.append(ev.StepEnded(t=t, pid=pid, step=step, duration_s=dt, samples=8, tokens=4096,
                                        data_wait_s=0.0002, executions=1, compiles=1 if compiled else 0,
                                        input_shapes=[[8, 512]], presync_s=pre))
            if step % 10 == 0:
                out.append(ev.OutputLine(t=t, stream="stdout", text=f"step {step} loss {7.0 / (1 + step / 500):.4f}"))
                out.append(ev.LossReported(t=t, value=7.0 / (1 + step / 500), step=step))
            step += 1
        yield sec, out


def _neuron(t: float, step: int) -> dev.NeuronSample:
    return console_cost._neuron(t, step)


def _host(t: float, step: int) -> dev.HostSample:
    return console_cost._host(t, step)


def _tree(t: float, pids: list[int]) -> dev.ProcessTreeSample:
    procs = [dev.ProcessInfo(pid=PID0 - 1, ppid=1, name="torchrun", role="launcher", cpu_percent=1.0,
                             cpu_time_s=1.0, rss=200 << 20, threads=4, elapsed_s=10.0)]
    procs += [dev.ProcessInfo(pid=pid, ppid=PID0 - 1, name="python", role="main", cpu_percent=101.0,
                              cpu_time_s=t % 1000, rss=6 << 30, threads=40, elapsed_s=10.0) for pid in pids]
    return dev.ProcessTreeSample(t=t, root_pid=PID0 - 1, processes=procs, total_cpu_percent=101.0 * len(pids),
                                 total_rss=(6 << 30) * len(pids), dataloader_workers=0, dataloader_cpu_percent=0.0)


# ------------------------------------------------------------------ 1. recorder
def recorder(ranks: int, seconds: int, folder: str, stragglers_every_s: int = 1) -> dict:
    """Decode + journal + reduce each simulated second (probe events as the bytes the probe sends),
    then stragglers() once; CPU time of this thread."""
    path = os.path.join(folder, f"ingest-{ranks}.jsonl")
    state = RunState()
    proc = psutil.Process()
    ingest_cpu = straggler_cpu = 0.0
    calls = steps = 0
    rss = []
    found = []
    gc.collect()
    rss0 = proc.memory_info().rss
    with JournalWriter(path) as journal:
        for sec, events in stream(ranks, seconds):
            # the probe's bytes (encoding them is the probe's cost, not the recorder's: outside the clock)
            items = [(encode_event(e), None) if e.kind in PROBE_KINDS else (None, e) for e in events]
            steps += sum(1 for e in events if e.kind == "step")
            del events
            c0 = time.process_time()
            for line, e in items:
                if line is not None:
                    e = decode_probe_line(line, T0)
                journal.write(e)
                state.apply(e)
            c1 = time.process_time()
            ingest_cpu += c1 - c0
            if ranks > 1 and sec % stragglers_every_s == 0:
                found = state.parts.ranks.stragglers()
                straggler_cpu += time.process_time() - c1
                calls += 1
            if (sec + 1) % max(1, seconds // 4) == 0:
                rss.append(round((proc.memory_info().rss - rss0) / 2**20, 1))
    size = os.path.getsize(path)
    os.unlink(path)
    assert state.steps_done == seconds * STEPS_PER_S, state.steps_done
    return {
        "ranks": ranks, "simulated_s": seconds, "step_events": steps,
        "step_events_per_s": steps // seconds,
        "events_per_s_all_kinds": round(state.event_count / seconds),
        "ingest_cpu_percent_of_one_core": round(100 * ingest_cpu / seconds, 2),
        "ingest_us_per_event": round(1e6 * ingest_cpu / state.event_count, 2),
        "stragglers_calls": calls,
        "stragglers_ms_per_call": round(1000 * straggler_cpu / calls, 2) if calls else None,
        "stragglers_cpu_percent_of_one_core": round(100 * straggler_cpu / seconds, 2),
        "total_cpu_percent_of_one_core": round(100 * (ingest_cpu + straggler_cpu) / seconds, 2),
        "stragglers_found": [s.words() for s in found],
        "rss_growth_mib_at_quarters": rss,
        "journal_mib": round(size / 2**20, 1),
    }


# ------------------------------------------------------------------ 2. console
def build_journal(run_dir: Path, ranks: int, seconds: int) -> int:
    n = 0
    with JournalWriter(run_dir / "events.jsonl") as w:
        for _, events in stream(ranks, seconds):
            for e in events:
                w.write(e)
            n += len(events)
    return n


def console(run_dir: Path, size: tuple[int, int], seconds: float, keys: bytes = b"") -> dict:
    console_cost.COLS, console_cost.ROWS = size
    if keys:  # a key once the first frames are up: the Ranks tab (r) at 80x24
        con = console_cost.PtyConsole(run_dir, 1.0)
        time.sleep(2.0)
        con.press(keys)
        # measure this console from here, with the same sampling as console_cost.measure
        p = psutil.Process(con.proc.pid)
        samples = []
        t_end = time.monotonic() + seconds - 2.0
        while time.monotonic() < t_end and con.proc.poll() is None:
            time.sleep(1.0)
            ct = p.cpu_times()
            samples.append((time.monotonic() - con.t_start, ct.user + ct.system, p.memory_info().rss))
        code = con.close()
        steady = [s for s in samples if s[0] >= 5.0]
        cpu = 100.0 * (steady[-1][1] - steady[0][1]) / (steady[-1][0] - steady[0][0])
        out = {"cpu_percent_of_one_core": round(cpu, 2), "rss_mib_first_last": [round(steady[0][2] / 2**20, 1),
                                                                                 round(steady[-1][2] / 2**20, 1)],
               "first_frame_s": con.first_frame_s and round(con.first_frame_s, 3), "exit_code": code}
    else:
        m = console_cost.measure(run_dir, 1.0, seconds)
        out = {k: m[k] for k in ("cpu_percent_of_one_core", "first_frame_s", "exit_code")}
        out["rss_mib_first_last"] = [m["rss_mib"]["at_0%"], m["rss_mib"]["at_100%"]]
    out["terminal"] = f"{size[0]}x{size[1]}" + (f", key {keys.decode()!r}" if keys else "")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--sim-seconds", type=int, default=240, help="simulated seconds for the recorder (default 240)")
    ap.add_argument("--console-seconds", type=float, default=25.0, help="real seconds per console arm (default 25)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nd-ranks-bench-") as tmp:
        rec_base = recorder(1, args.sim_seconds, tmp)
        print(json.dumps(rec_base), flush=True)
        rec = recorder(args.ranks, args.sim_seconds, tmp)
        print(json.dumps(rec), flush=True)
        runs = {}
        for ranks in (args.ranks, 1):
            run = Path(tmp) / f"ranks-{ranks}"
            run.mkdir()
            runs[ranks] = (run, build_journal(run, ranks, int(args.console_seconds) + 20))
        arms = {
            f"{args.ranks}_ranks_160x48": console(runs[args.ranks][0], (160, 48), args.console_seconds),
            "1_rank_160x48_baseline": console(runs[1][0], (160, 48), args.console_seconds),
            f"{args.ranks}_ranks_80x24_ranks_tab": console(runs[args.ranks][0], (80, 24), args.console_seconds,
                                                           b"r"),
            f"{args.ranks}_ranks_80x24_overview_tab": console(runs[args.ranks][0], (80, 24), args.console_seconds),
        }
        for name, arm in arms.items():
            print(name, json.dumps(arm), flush=True)
    base = arms["1_rank_160x48_baseline"]["cpu_percent_of_one_core"]
    wide = arms[f"{args.ranks}_ranks_160x48"]["cpu_percent_of_one_core"]
    result = {
        "benchmark": "ranks_stream",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "rerun": "python benchmarks/ranks_stream.py" + (
            f" --ranks {args.ranks} --sim-seconds {args.sim_seconds} --console-seconds {args.console_seconds:g}"
            if (args.ranks, args.sim_seconds, args.console_seconds) != (32, 240, 25.0) else ""),
        "stream": f"{args.ranks} ranks x {STEPS_PER_S} steps/s ({args.ranks * STEPS_PER_S:,} step events/s) with "
                  f"presync_s (rank {STRAGGLER} +{STRAGGLER_EXTRA_S * 1000:.0f} ms), first compiles on every rank, a "
                  "recompile on rank 7 every 20 s, NeuronSample (32 cores) + host (128 vCPU) + process tree at "
                  "1 Hz, a log line and a loss every 10 steps; baseline: the same from 1 rank",
        "goals": {"recorder_cpu_percent_of_one_core": 5.0, "console_cpu_percent_of_one_core": 5.0, "memory": "flat"},
        "recorder": {"baseline_1_rank": rec_base, f"{args.ranks}_ranks": rec,
                     "ratio_ingest_cpu_vs_1_rank": round(rec["ingest_cpu_percent_of_one_core"]
                                                         / rec_base["ingest_cpu_percent_of_one_core"], 1)},
        "console": {**arms, "ratio_160x48_vs_1_rank": round(wide / base, 2) if base else None},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
        "notes": "Recorder: CPU time of one thread (time.process_time) over the simulated stream, the probe's "
                 "bytes built outside the clock; the recorder's socket reads and its other threads (collectors) "
                 "are not in it (watch_cost.py measures the whole recorder on a live run). Console: the real "
                 "`neurondesk replay` at speed 1 in a pty (it reads and decodes the journal as it plays: the "
                 "attach path's work), CPU after its first 5 s. Shared 2-core machine: other test runs were "
                 "going on; load average in machine.",
        "benchmark_wall_s": round(time.monotonic() - started, 1),
    }
    try:
        import textual

        result["machine"]["textual"] = textual.__version__
    except (ImportError, AttributeError):
        pass
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("recorder", "console")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
