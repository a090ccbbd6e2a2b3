"""Stacks of a hung job: the dumps read and compared (tests/data/stacks: a real 2-rank gloo job's),
and a real 2-rank torchrun job over gloo whose rank 1 sleeps before its step while rank 0 waits in
the backward's all-reduce: the recorder says it hung, `neurondesk stacks` names rank 1 (through
py-spy and through the probe's faulthandler dump), and its export is a valid trace of both ranks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, base_env, wait_until
from test_ranks import TORCHRUN, WORKLOADS
from test_trace_export import check_trace_format

from neurondesk.core.stacks import RankStacks, odd_ranks, parse_faulthandler, parse_py_spy, verdict

DATA = Path(__file__).parent / "data" / "stacks"
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


def test_a_real_two_rank_gloo_job_hung_on_rank_1(tmp_path):
    env = base_env(tmp_path)
    run_dir = tmp_path / "run"
    start = subprocess.run([*ND, "run", "--detach", "--run-dir", str(run_dir), "--price-per-hour", "1", "--hang-after", "3",
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
        for flags, source in (([], "py-spy" if py_spy_may_attach() else "faulthandler"), (["--no-py-spy"], "faulthandler")):
            p = subprocess.run([*ND, "stacks", str(run_dir), *flags], capture_output=True, text=True, env=env,
                               cwd=REPO, timeout=120)
            assert p.returncode == 0, p.stderr
            assert p.stdout.count(f"), from {source} ====") == 2, p.stdout[-3000:]
            last = p.stdout.strip().splitlines()[-1]
            assert last.startswith(f"neurondesk: rank 1 stands at main at train.py:{SLEEP_LINE}, while the other "
                                   "rank waits at "), last
    finally:
        from neurondesk.sources.control_client import ControlError, request

        try:
            request(run_dir, "stop")
        except ControlError:
            pass
        wait_until(lambda: (run_dir / "summary.json").exists(), 60, "the run to end")
        _, attached = viewer.communicate(timeout=60)
    assert f"neurondesk: alert: {hung[0]}" in attached
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
