"""Stacks of a hung job: the dumps read and compared (tests/data/stacks: a real 2-rank gloo job's),
and a real 2-rank torchrun job over gloo, with PyTorch's Flight Recorder on, whose rank 1 sleeps
before its step while rank 0 waits in the backward's all-reduce: the recorder says it hung and names
the collective, `neurondesk stacks` says which collective rank 0 is blocked in and that rank 1 never
entered it, then names rank 1 (through py-spy and through the probe's faulthandler dump); the node's
series carries the collective while blocked (a real Prometheus, read back as the job's blocked
line) and not after; its export is a valid trace of both ranks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, base_env, wait_until
from prometheus_harness import Prometheus, binaries, free_port, http_get, require_prometheus
from test_ranks import TORCHRUN, WORKLOADS
from test_trace_export import check_trace_format

from neurondesk.core.node.stacks import RankStacks, odd_ranks, parse_faulthandler, parse_py_spy, verdict

DATA = REPO / "tests" / "data" / "stacks"
ND = [sys.executable, "-m", "neurondesk.cli"]
SLEEP_LINE = next(i for i, line in enumerate((WORKLOADS / "train.py").read_text().splitlines(), 1)
                  if "time.sleep(args.hang_s)" in line)


def dumped(rank: int, name: str | None = None) -> RankStacks:
    text = (DATA / f"faulthandler-rank{name if name is not None else rank}.txt").read_text()
    return RankStacks(rank, 100 + rank, "faulthandler", parse_faulthandler(text), text)


def test_a_faulthandler_dump_is_read_with_its_main_thread_last():
    r = dumped(1)
    assert len(r.threads) == 2 and r.threads[-1].main and not r.threads[0].main
    assert r.at.function == "main" and r.at.file.endswith("workloads/train.py") and not r.at.in_library
    r0 = dumped(0)
    assert r0.at.function == "_engine_run_backward" and r0.at.in_library
    assert r0.user_at.file.endswith("workloads/train.py")  # the probe's own frame is not the user's


def test_the_rank_in_its_own_code_stands_elsewhere_than_the_one_waiting_in_torch():
    ranks = [dumped(0), dumped(1)]
    assert odd_ranks(ranks) == [ranks[1]]
    assert verdict(ranks).startswith(f"rank 1 stands at main at train.py:{ranks[1].at.line}, while the other "
                                     "rank waits at _engine_run_backward at graph.py:")


def test_with_a_majority_the_odd_one_is_outside_it():
    ranks = [dumped(0), dumped(1), dumped(2, name="0"), dumped(3, name="0")]
    assert [r.rank for r in odd_ranks(ranks)] == [1]
    assert "while the other ranks wait at _engine_run_backward" in verdict(ranks)
    same = [dumped(0), dumped(2, name="0")]
    assert odd_ranks(same) == [] and verdict(same).startswith("every rank stands at _engine_run_backward")
    assert verdict([RankStacks(0, 1, "none")]) == "no stack could be read from any rank"


def test_py_spy_json_is_read():
    text = json.dumps([{"thread_name": "Thread-1", "frames": [{"name": "run", "filename": "/x/threading.py", "line": 9}]},
                       {"thread_name": "MainThread", "frames": [{"name": "main", "filename": "/w/train.py", "line": 7},
                                                                {"name": "<module>", "filename": "/w/train.py", "line": 9}]}])
    threads = parse_py_spy(text)
    assert [t.main for t in threads] == [False, True]
    assert RankStacks(0, 1, "py-spy", threads).at.words() == "main at train.py:7"
    assert parse_py_spy("Error: Permission denied") == ()


def py_spy_may_attach() -> bool:
    """py-spy is installed (the test extra) and may ptrace a process that is not our child: root, or
    kernel.yama.ptrace_scope 0 (where it may not, `stacks` falls back to the probe's dump: tested so)."""
    import os
    import shutil

    if shutil.which("py-spy") is None and not (Path(sys.executable).parent / "py-spy").exists():
        return False
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        scope = 0
    return os.geteuid() == 0 or scope == 0


def alerts(run_dir: Path) -> list[str]:
    try:
        lines = (run_dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [e["message"] for e in map(json.loads, filter(None, lines)) if e["kind"] == "notice" and e.get("source") == "alert"]


def blocked_series(port: int) -> list[str]:
    return [line for line in http_get(f"http://127.0.0.1:{port}/metrics")[1].splitlines()
            if line.startswith("neurondesk_blocked_collective_info{")]


def test_a_real_two_rank_gloo_job_hung_on_rank_1(tmp_path):
    from neurondesk.clients.prometheus_api import FleetReader, PrometheusAPI
    from neurondesk.core.job.job_view import job_view
    from neurondesk.reports.job_text import job_json

    env = base_env(tmp_path) | {"TORCH_FR_BUFFER_SIZE": "64"}  # Flight Recorder on in the ranks
    run_dir, port = tmp_path / "run", free_port()
    prom = Prometheus(tmp_path / "prom") if binaries() else None
    if prom is not None:
        prom.set_targets({f"127.0.0.1:{port}": "trn-07"})
    start = subprocess.run([*ND, "run", "--detach", "--run-dir", str(run_dir), "--price-per-hour", "1", "--hang-after", "3",
                            "--metrics-addr", str(port), "--job", "job-fr", "--node", "trn-07", "--metrics-grace", "10",
                            "--", *TORCHRUN, "--standalone", "--nproc_per_node", "2", str(WORKLOADS / "train.py"),
                            "--preset", "demo", "--device", "cpu", "--steps", "12", "--hang-at-step", "8",
                            "--hang-rank", "1", "--hang-s", "120"],
                           capture_output=True, text=True, env=env, cwd=WORKLOADS, timeout=120)
    assert start.returncode == 0, start.stderr
    # a viewer attached with --notify before the hang: it prints the alert when the recorder journals it
    viewer = subprocess.Popen([*ND, "attach", str(run_dir), "--headless", "--notify"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        hung = wait_until(lambda: [m for m in alerts(run_dir) if m.startswith("hung at step")], 150, "the hang notice")
        assert hung[0].startswith("hung at step 7 for")
        m = re.search(r"Flight Recorder: trn-07: rank 0 blocked in collective #(\d+) gloo:all_reduce \(Float \[\d+\]\) "
                      r"of default_pg; rank 1 never reached it \(last: #(\d+)\)$", hung[0])
        assert m and int(m.group(2)) == int(m.group(1)) - 1, hung[0]
        seq = int(m.group(1))
        for flags, source in (([], "py-spy" if py_spy_may_attach() else "faulthandler"), (["--no-py-spy"], "faulthandler")):
            p = subprocess.run([*ND, "stacks", str(run_dir), *flags], capture_output=True, text=True, env=env,
                               cwd=REPO, timeout=120)
            assert p.returncode == 0, p.stderr
            flight, stacks = p.stdout.split("\n==== rank 0 (pid", 1)  # the Flight Recorder comes first
            assert re.search(rf"^rank 0: blocked in gloo:all_reduce #{seq} \(Float \[\d+\]\) of default_pg \(state "
                             rf"scheduled, entered #{seq}, completed #{seq - 1}\)$", flight, re.M), flight
            assert f"\nrank 1: never entered gloo:all_reduce #{seq} of default_pg (its last: #{seq - 1}, " in flight
            assert f"rank 1 never reached it (last: #{seq - 1})" in flight.strip().splitlines()[-1]
            assert stacks.count(f"), from {source} ====") == 2, p.stdout[-3000:]
            last = p.stdout.strip().splitlines()[-1]
            assert last.startswith(f"neurondesk: rank 1 stands at main at train.py:{SLEEP_LINE}, while the other "
                                   "rank waits at "), last
        series = wait_until(lambda: blocked_series(port), 30, "the blocked collective's series")
        assert len(series) == 1 and f'seq="{seq}"' in series[0] and 'op="gloo:all_reduce"' in series[0], series
        assert 'never_entered="1"' in series[0] and 'ranks="0"' in series[0] and series[0].endswith(" 1.0"), series
        if prom is not None:  # read back as the job view reads it
            reader = FleetReader(PrometheusAPI(prom.url), job="job-fr")
            read = wait_until(lambda: (r := reader.read()).rows and r.rows[0].blocked_collective and r, 60,
                              "Prometheus to hold the blocked collective")
            out = job_json(job_view(read, "job-fr"))
            assert out["blocked_collective"][0] | {"state": "?"} == {
                "node": "trn-07", "op": "gloo:all_reduce", "seq": seq, "group": "default_pg", "state": "?",
                "ranks": [0], "never_entered": [1], "last": [seq - 1]}
            assert any(line.startswith("1 rank(s) blocked in a collective since ") and line.endswith(
                f": gloo:all_reduce #{seq} of default_pg on trn-07 (rank 0); rank 1 never entered it (last: #{seq - 1})")
                for line in out["lines"]), out["lines"]
            assert not out["healthy"]
    finally:
        from neurondesk.sources.control_client import ControlError, request

        try:
            request(run_dir, "stop")
        except ControlError:
            pass
        wait_until(lambda: (run_dir / "summary.json").exists(), 60, "the run to end")
        _, attached = viewer.communicate(timeout=60)
        try:
            after = blocked_series(port)  # the run has ended: no longer blocked (the grace period serves it)
        except OSError:
            after = None
        if prom is not None:
            prom.stop()
    assert after == [], after
    assert f"neurondesk: alert: {hung[0]}" in attached
    if prom is None:
        require_prometheus()  # the job view's part needs the real Prometheus: skipped with the reason, or failed in CI
    doc = json.loads(subprocess.run([*ND, "export", str(run_dir), "-o", "-"], capture_output=True, text=True,
                                    cwd=REPO, env=env, timeout=120, check=True).stdout)
    events = check_trace_format(doc)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {n.split(" (")[0] for n in names} == {"job", "rank 0", "rank 1"}
    steps = {e["pid"] for e in events if e.get("cat") == "step"}
    assert len(steps) == 2


@pytest.mark.parametrize("arg", ["nope-no-such-run"])
def test_stacks_of_no_live_run_is_one_line(tmp_path, arg):
    p = subprocess.run([*ND, "stacks", arg], capture_output=True, text=True, cwd=REPO, env=base_env(tmp_path), timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
