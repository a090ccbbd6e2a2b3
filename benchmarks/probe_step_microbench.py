"""The probe's cost per optimizer step, installed the way a real run installs it.

100,000 `optimizer.step()` calls per round on a one-element parameter (SGD, eager torch on the
CPU) with the real probe, against the same loop without it, in interleaved rounds of the same
invocation. The probe is installed as the bootstrap installs it: `install()` before torch is
imported, so the post-import finder patches `torch.optim.optimizer` (global optimizer-step hooks)
and `torch.compiler` exactly as in a workload. It talks over a real Unix socket to a reader in
another process (its own GIL) that reads lines the way the recorder does: line by line from the
connection, each stamped with its arrival time and queued, then decoded on another thread.

For the rounds without the probe, its two global optimizer-step hooks are taken out of torch's
hook tables (and put back for the next round with it): the loop is then plain torch.

    .venv/bin/python benchmarks/probe_step_microbench.py [--steps 100000] [--rounds 5]

To measure another version of the probe alone, point --probe-dir at a folder holding it.
To compare the probe of this tree with an earlier commit's in the same invocation:

    .venv/bin/python benchmarks/probe_step_microbench.py --baseline 891f922 [--pairs 3]

runs this benchmark in fresh processes, alternately with the earlier probe (extracted with
`git show REV:...` into a temporary folder: the one-file probe before the split, or the package
after it) and with this tree's, --pairs times each, and reports the cost ratio (this tree /
baseline, per-step probe cost, wall and CPU) in benchmarks/results/probe_step_microbench_vs_baseline.json.

Writes benchmarks/results/probe_step_microbench.json (the same command is in it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_machine import machine

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"
RESULTS = REPO / "benchmarks" / "results"

# The recorder's reading side (collectors/workload.py): one thread per connection reads lines and
# queues them with their arrival time; another thread decodes them. Here decoding counts kinds.
READER = r"""
import json, os, queue, socket, sys, threading, time
MAX_LINE = 1 << 20
path = sys.argv[1]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(64)
q = queue.SimpleQueue()
counts = {}
def read(conn):
    with conn, conn.makefile("rb") as f:
        for line in f:
            q.put((time.time(), line[:MAX_LINE]))
    q.put(None)
def decode():
    while True:
        item = q.get()
        if item is None:
            return
        kind = json.loads(item[1]).get("kind")
        counts[kind] = counts.get(kind, 0) + 1
print("ready", flush=True)
conn, _ = server.accept()
reader = threading.Thread(target=read, args=(conn,))
decoder = threading.Thread(target=decode)
reader.start(); decoder.start()
reader.join(); decoder.join()
print(json.dumps(counts), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000, help="optimizer steps per round and arm")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--probe-dir", default=str(BOOTSTRAP),
                    help="folder holding the _neurondesk_probe.py to measure (to compare with another version)")
    ap.add_argument("--no-write", action="store_true", help="print only, leave the results file alone")
    ap.add_argument("--baseline", metavar="REV", help="compare with the probe of this commit (see above)")
    ap.add_argument("--pairs", type=int, default=3, help="with --baseline: runs of each probe, alternated")
    ap.add_argument("--result-file", help=argparse.SUPPRESS)  # where a child run of --baseline writes
    ap.add_argument("--device", choices=["cpu", "neuron"], default="cpu",
                    help="neuron: import torch_neuronx (TorchNeuron, or its test double on PYTHONPATH) and put the "
                         "parameter on its device: the probe's TorchNeuron step path (probe_step_torchneuron.py)")
    ap.add_argument("--torch-neuronx", action="store_true",
                    help="import torch_neuronx (its metrics read at each step end) with the parameter on --device")
    ap.add_argument("--function-mode", action="store_true",
                    help="a do-nothing torch function mode entered for the process's life, as the TorchNeuron "
                         "double's device mode is (every torch call of the step through Python), without TorchNeuron")
    ap.add_argument("--count-calls", action="store_true",
                    help="also count the Python and C calls the probe adds to a step (sys.setprofile: exact, blind "
                         "to load on the machine)")
    args = ap.parse_args()
    if args.baseline:
        compare_with_baseline(args)
        return

    folder = tempfile.mkdtemp(prefix="nd-mb-")
    path = os.path.join(folder, "probe.sock")
    reader = subprocess.Popen([sys.executable, "-c", READER, path], stdout=subprocess.PIPE, text=True)
    assert reader.stdout.readline().strip() == "ready"

    # As the bootstrap sitecustomize does it, before the workload imports torch.
    os.environ["NEURONDESK_SOCKET"] = path
    sys.path.insert(0, args.probe_dir)
    import _neurondesk_probe as probe_mod

    probe_mod.install()
    sys.path.remove(args.probe_dir)
    import torch  # the finder patches torch.optim.optimizer and torch.compiler here
    import torch.optim.optimizer as optmod

    if args.device == "neuron" or args.torch_neuronx:
        import torch_neuronx  # noqa: F401 - the probe's finder patches it: its metrics read at each step end
    if args.function_mode:
        enter_function_mode(torch)
    probe = probe_mod._probe
    pre, post = dict(optmod._global_optimizer_pre_hooks), dict(optmod._global_optimizer_post_hooks)
    assert len(pre) == 1 and len(post) == 1, "the probe's optimizer hooks were not installed by the finder"

    def probe_on(on: bool) -> None:
        for table, saved in ((optmod._global_optimizer_pre_hooks, pre), (optmod._global_optimizer_post_hooks, post)):
            table.clear()
            if on:
                table.update(saved)

    param = torch.nn.Parameter(torch.zeros(1).to(args.device))
    opt = torch.optim.SGD([param], lr=0.0)

    cpu_s: dict[bool, list[float]] = {True: [], False: []}

    def timed(n: int, with_probe: bool | None = None) -> float:
        step = opt.step
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            step()
        t1, c1 = time.perf_counter(), time.process_time()
        if with_probe is not None:
            cpu_s[with_probe].append(c1 - c0)
        return t1 - t0

    probe_on(True)
    timed(1000)  # warm-up: hello, device report, first connect
    probe_on(False)
    timed(1000)
    probe_steps = 1000
    with_s, without_s = [], []
    for _ in range(args.rounds):
        probe_on(False)
        without_s.append(timed(args.steps, False))
        probe_on(True)
        with_s.append(timed(args.steps, True))
        probe_steps += args.steps
    probe_on(True)
    calls = count_calls(opt.step, probe_on) if args.count_calls else None
    probe_on(True)
    assert not probe.disabled, "the probe disabled itself during the benchmark"

    # Hand over what is still buffered, then end the connection so the reader reports its counts.
    for name in ("flush_at_exit", "_at_exit"):
        if hasattr(probe, name):
            getattr(probe, name)()
            break
    transport = getattr(probe, "transport", probe)  # the one-file probe before the split held its socket
    with transport.lock:
        if transport.sock is not None:
            transport.sock.shutdown(socket.SHUT_WR)
    counts = json.loads(reader.stdout.readline())
    reader.wait(timeout=60)
    shutil.rmtree(folder, ignore_errors=True)

    per_round_us = [(w - wo) / args.steps * 1e6 for w, wo in zip(with_s, without_s, strict=True)]
    cpu_round_us = [(w - wo) / args.steps * 1e6 for w, wo in zip(cpu_s[True], cpu_s[False], strict=True)]
    rate_with = args.steps / statistics.median(with_s)
    rate_without = args.steps / statistics.median(without_s)
    cmd = f".venv/bin/python benchmarks/probe_step_microbench.py --steps {args.steps} --rounds {args.rounds}"
    if args.device != "cpu":
        cmd += f" --device {args.device}"
    if args.torch_neuronx and args.device != "neuron":
        cmd += " --torch-neuronx"
    if args.function_mode:
        cmd += " --function-mode"
    if Path(args.probe_dir).resolve() != BOOTSTRAP:
        cmd += f" --probe-dir {args.probe_dir}"
    result = {
        "benchmark": "probe_step_microbench",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": cmd,
        "machine": machine(),
        "torch": torch.__version__,
        "device": args.device,
        "torch_neuronx": args.device == "neuron" or args.torch_neuronx,
        "function_mode": args.function_mode,
        "steps_per_round": args.steps,
        "rounds": args.rounds,
        "steps_per_s_without_probe": round(rate_without),
        "steps_per_s_with_probe": round(rate_with),
        "probe_cost_us_per_step_median": round(statistics.median(per_round_us), 2),
        "probe_cost_us_per_step_rounds": [round(x, 2) for x in per_round_us],
        # less sensitive to other load on a shared machine: fastest round of each arm
        "probe_cost_us_per_step_best_rounds": round((min(with_s) - min(without_s)) / args.steps * 1e6, 2),
        # CPU time of this process (all its threads: the probe's flusher too), not wall time: what
        # the probe takes from the workload, nearly blind to other programs on the machine
        "probe_cpu_us_per_step_median": round(statistics.median(cpu_round_us), 2),
        "probe_cpu_us_per_step_rounds": [round(x, 2) for x in cpu_round_us],
        "probe_cpu_us_per_step_best_rounds": round((min(cpu_s[True]) - min(cpu_s[False])) / args.steps * 1e6, 2),
        "probe": str(Path(probe_mod.__file__).resolve().relative_to(REPO)) if args.probe_dir == str(BOOTSTRAP)
        else probe_mod.__file__,
        "probe_steps": probe_steps,
        **({"probe_calls_per_step": calls} if calls is not None else {}),
        "reader_received": counts,
        "goal_us_per_step": 20,
        "note": "cost = (with - without) / steps for each interleaved round, wall clock; median over rounds. "
                "The reader process shares the machine's cores with the benchmark; on a busy machine the "
                "CPU-time figure is the steadier one.",
    }
    print(json.dumps(result, indent=2))
    if args.result_file:
        Path(args.result_file).write_text(json.dumps(result))
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "probe_step_microbench.json").write_text(json.dumps(result, indent=2) + "\n")


def enter_function_mode(torch) -> None:
    """A torch function mode that only forwards (the TorchNeuron double's, less its device logic)."""
    class Forward(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if torch.compiler.is_compiling():
                return func(*args, **kwargs)
            return func(*args, **kwargs)

    Forward().__enter__()


def count_calls(step, probe_on, n: int = 2000) -> dict:
    """The calls the probe adds to one step: (calls with it - calls without) / n, by function."""
    def counted(on: bool) -> dict:
        probe_on(on)
        seen: dict = {}

        def prof(frame, event, arg) -> None:
            if event == "call":
                key = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
            elif event == "c_call":
                key = f"C {getattr(arg, '__qualname__', repr(arg))}"
            else:
                return
            seen[key] = seen.get(key, 0) + 1

        sys.setprofile(prof)
        try:
            for _ in range(n):
                step()
        finally:
            sys.setprofile(None)
        return seen

    without, with_ = counted(False), counted(True)
    added = {k: round((with_.get(k, 0) - without.get(k, 0)) / n, 2) for k in set(with_) | set(without)}
    added = {k: v for k, v in sorted(added.items(), key=lambda kv: (-kv[1], kv[0])) if abs(v) >= 0.01}
    return {"python": round(sum(v for k, v in added.items() if not k.startswith("C ")), 2),
            "c": round(sum(v for k, v in added.items() if k.startswith("C ")), 2), "by_function": added}


def extract_probe(rev: str, folder: Path) -> None:
    """The bootstrap's probe as of commit `rev` into `folder`: the one file, or the package."""
    tree = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", rev, "neurondesk/probe/bootstrap/"],
                          capture_output=True, text=True, check=True).stdout.split()
    probe_files = [f for f in tree if f.endswith(".py") and "_neurondesk_probe" in f]
    assert probe_files, f"no probe in {rev}"
    for name in probe_files:
        rel = Path(name).relative_to("neurondesk/probe/bootstrap")
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{name}"],
                                                  capture_output=True, check=True).stdout)


def compare_with_baseline(args) -> None:
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.baseline],
                         capture_output=True, text=True, check=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="nd-mb-base-"))
    extract_probe(rev, tmp)
    arms = {"baseline": str(tmp), "this_tree": str(BOOTSTRAP)}
    # the arm's own options reach every child (they were dropped: a --device neuron comparison ran on the CPU)
    same = ([f"--device={args.device}"] + (["--torch-neuronx"] if args.torch_neuronx else [])
            + (["--function-mode"] if args.function_mode else []))
    runs: dict[str, list[dict]] = {"baseline": [], "this_tree": []}
    for i in range(args.pairs):
        for arm in (("baseline", "this_tree") if i % 2 == 0 else ("this_tree", "baseline")):
            out = tmp / f"{arm}-{i}.json"
            subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--rounds", str(args.rounds),
                            "--probe-dir", arms[arm], "--no-write", "--result-file", str(out), *same],
                           check=True, stdout=subprocess.DEVNULL)
            runs[arm].append(json.loads(out.read_text()))
    shutil.rmtree(tmp, ignore_errors=True)

    def med(arm: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[arm])

    wall = {arm: med(arm, "probe_cost_us_per_step_median") for arm in runs}
    cpu = {arm: med(arm, "probe_cpu_us_per_step_median") for arm in runs}
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    result = {
        "benchmark": "probe_step_microbench_vs_baseline",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": f"{Path(sys.executable).parent.parent.name}/bin/python benchmarks/probe_step_microbench.py "
                   f"--baseline {args.baseline} --pairs {args.pairs} --steps {args.steps} --rounds {args.rounds} "
                   + " ".join(same),
        "torch": runs["this_tree"][0].get("torch") if runs["this_tree"] else None,
        "machine": machine(),
        "baseline_commit": rev,
        "this_tree_head": head + " (plus uncommitted changes, if any, at the time of the run)",
        "probe_cost_us_per_step": {arm: round(v, 2) for arm, v in wall.items()},
        "probe_cpu_us_per_step": {arm: round(v, 2) for arm, v in cpu.items()},
        "ratio_this_tree_to_baseline_wall": round(wall["this_tree"] / wall["baseline"], 3) if wall["baseline"] > 0 else None,
        "ratio_this_tree_to_baseline_cpu": round(cpu["this_tree"] / cpu["baseline"], 3) if cpu["baseline"] > 0 else None,
        "runs": {arm: [{k: r[k] for k in ("probe_cost_us_per_step_median", "probe_cpu_us_per_step_median",
                                          "steps_per_s_without_probe", "steps_per_s_with_probe", "reader_received")}
                       for r in rs] for arm, rs in runs.items()},
        "note": "each run is a fresh process measuring its probe against plain torch in interleaved rounds; the "
                "two probes alternate run by run; the figures are the medians over runs. Ratio < 1: this tree's "
                "probe costs less per step.",
    }
    print(json.dumps(result, indent=2))
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "probe_step_microbench_vs_baseline.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
