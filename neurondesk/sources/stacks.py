"""The Python stacks of every rank of a live run (`neurondesk stacks RUN`, the console's `k`).

Per rank, in parallel: ``py-spy dump --json`` where py-spy is installed and allowed (it needs
ptrace: root, or kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE), else the dump the probe's
faulthandler writes on SIGUSR2 into the run's private folder (collectors/stacks.py). Nothing is
ever written into the workload's streams. core/node/stacks.py reads the dumps and says which rank
stands somewhere else than the others.

Before them, where the ranks run with PyTorch's Flight Recorder on (their hellos say its variables, a
probe serves its dump, or torch's watchdog left dump files): each rank's dump, read on request
(collectors/flight_recorder.py), says which collective it is blocked in and which rank never
entered it (core/node/flight_recorder.py); where it is off, a line says how to turn it on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from neurondesk.collectors.flight_recorder import NodeDumps, answers, node_dumps
from neurondesk.collectors.stacks import request_stacks
from neurondesk.core.node.flight_recorder import ENABLE_HINT, enabled, flight_env, rank_lines
from neurondesk.core.node.stacks import RankStacks, parse_faulthandler, parse_py_spy
from neurondesk.core.view.read_views import job_identity, rank_of_pid
from neurondesk.sources.rebuild import state_from_run_dir
from neurondesk.store.liveness import pid_running, read_recorder_info, recorder_alive
from neurondesk.store.rundir import RunPaths

PY_SPY_TIMEOUT_S = 10.0
DUMP_TIMEOUT_S = 3.0


class StacksUnavailable(RuntimeError):
    """The run is not live, or its processes cannot be reached; the message says why."""


def _py_spy(pid: int, binary: str) -> tuple[str, str] | None:
    """(the JSON dump, "") or None when py-spy cannot read this process (permission, a race)."""
    try:
        p = subprocess.run([binary, "dump", "--json", "--full-filenames", "--pid", str(pid)], capture_output=True,
                           text=True, timeout=PY_SPY_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout, "") if p.returncode == 0 and p.stdout.strip().startswith("[") else None


def _find_py_spy() -> str | None:
    """py-spy on PATH, or beside this interpreter (installed into its venv, not activated)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)


def one_rank(pid: int, rank: int | None, private_dir: str | None, py_spy: str | None) -> RankStacks:
    if py_spy is not None:
        got = _py_spy(pid, py_spy)
        if got is not None:
            threads = parse_py_spy(got[0])
            if threads:
                return RankStacks(rank, pid, "py-spy", threads, got[0])
    text = request_stacks(pid, private_dir, timeout=DUMP_TIMEOUT_S) if private_dir else None
    if text:
        return RankStacks(rank, pid, "faulthandler", parse_faulthandler(text), text)
    why = ("no dump: py-spy is not installed or not allowed to ptrace, and the probe's SIGUSR2 dump is off in this "
           "process (the program handles SIGUSR2 itself, or the probe is not in it)")
    return RankStacks(rank, pid, "none", (), why)


@dataclass(frozen=True)
class FlightRead:
    """The ranks' Flight Recorder dumps, as `stacks` read them."""

    enabled: bool  # on in the ranks (their variables, a probe serving dumps, or dump files found)
    dumps: NodeDumps
    node: str


def live_run(run_dir: Path):
    """(the run's state, its private folder): a live run's, else StacksUnavailable."""
    if not recorder_alive(run_dir):
        raise StacksUnavailable(f"{run_dir} is not a live run (no recorder runs for it): stacks are read from "
                                "the processes of a run that is still going")
    info = read_recorder_info(run_dir)
    private = os.path.dirname(info.control_socket) if info is not None else None
    state, _ = state_from_run_dir(run_dir)
    return state, private


def gather_flight(run_dir: Path, live=None) -> FlightRead:
    """Every live rank's Flight Recorder dump (``live``: live_run's answer, when already read)."""
    state, private = live or live_run(Path(run_dir))
    targets = {pid: rank for pid, rank in rank_of_pid(state).items() if pid_running(pid)}
    env = flight_env(state.flight())
    dumps = node_dumps(targets, private, env, since=state.started_t) if targets else NodeDumps()
    on = enabled(env) or bool(private and answers(private)) or bool(dumps.records)
    return FlightRead(on, dumps, job_identity(state).node or "this node")


def flight_text(fr: FlightRead) -> str:
    """The Flight Recorder's lines, before the stacks; where it is off, how to turn it on."""
    if not fr.enabled:
        return f"neurondesk: {ENABLE_HINT}\n\n"
    out = ["==== Flight Recorder (PyTorch's record of each rank's collectives) ===="]
    out += rank_lines(fr.dumps.records)
    out += [f"(skipped: {p})" for p in fr.dumps.problems]
    words = fr.dumps.words(fr.node)
    if words:
        out.append(f"neurondesk: {words}")
    elif fr.dumps.records:
        out.append(f"neurondesk: Flight Recorder: no rank is blocked in a collective ({len(fr.dumps.records)} "
                   "rank(s) read)")
    else:
        out.append("neurondesk: Flight Recorder is on, but no rank's dump could be read")
    return "\n".join(out) + "\n\n"


def gather_stacks(run_dir: Path, use_py_spy: bool = True, live=None) -> list[RankStacks]:
    """Every live rank's stacks (a process that reports no step, when there is no rank)."""
    state, private = live or live_run(Path(run_dir))
    info = read_recorder_info(Path(run_dir))
    ranks: dict[int, int | None] = dict(rank_of_pid(state))
    if not ranks:
        ranks = {pid: None for pid in state.processes} or ({info.workload_pid: None} if info and info.workload_pid else {})
    alive = sorted((p for p in ranks if pid_running(p)), key=lambda p: (ranks[p] is None, ranks[p] or 0, p))
    if not alive:
        raise StacksUnavailable(f"none of the run's processes is alive ({', '.join(map(str, ranks)) or 'none seen'})")
    py_spy = _find_py_spy() if use_py_spy else None
    with ThreadPoolExecutor(max_workers=min(16, len(alive))) as pool:
        return list(pool.map(lambda p: one_rank(p, ranks[p], private, py_spy), alive))


def stacks_text(ranks: list[RankStacks]) -> str:
    """Each rank's stacks, as its source printed them, under a header line."""
    out = []
    for r in ranks:
        who = f"rank {r.rank}" if r.rank is not None else "process"
        out.append(f"==== {who} (pid {r.pid}), from {r.source} ====")
        if r.source == "py-spy":  # its JSON, as py-spy prints it without --json
            for t in r.threads:
                out.append(f'Thread "{t.name}"' + (" (main)" if t.main else ""))
                out += [f"    {f.function} ({f.file}:{f.line})" for f in t.frames]
        else:
            out.append(r.text.rstrip())
        out.append("")
    return "\n".join(out)


def stacks_report(run_dir: Path, use_py_spy: bool = True) -> tuple[str, str]:
    """(the Flight Recorder's lines, every rank's stacks and the verdict line; the verdict): what
    `neurondesk stacks` prints and the console's `k` saves."""
    from neurondesk.core.node.stacks import verdict

    live = live_run(Path(run_dir))
    flight = gather_flight(run_dir, live)  # first: the stacks' signals do not disturb the dumps
    ranks = gather_stacks(run_dir, use_py_spy=use_py_spy, live=live)
    words = verdict(ranks)
    return flight_text(flight) + stacks_text(ranks) + f"neurondesk: {words}\n", words


def save_stacks(run_dir: Path) -> tuple[str, Path]:
    """gather_stacks, written to stacks-YYYYmmdd-HHMMSS.txt in the run folder (0600, never through a
    link): (the verdict, the file)."""
    from neurondesk.store.summary_files import write_atomic

    text, words = stacks_report(run_dir)
    path = RunPaths(run_dir).stacks_file(datetime.now())
    write_atomic(path, text)
    return words, path
