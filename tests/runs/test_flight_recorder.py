"""PyTorch's Flight Recorder on a real torchrun/gloo hang (torch 2.9 on the CPU): the blocked
collective and the rank that never reached it, per node (issue 33 item 8); a dump that is not
plain data is refused without running anything; each rank's line; the blocked collective stands
until a step ends; Flight Recorder off says how to turn it on; a probe gone is one problem, at once.
(`stacks` and the hang notice on a real hung job: tests/runs/test_hang_stacks.py.)"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time

from conftest import DATA, REPO, base_env
from prometheus_harness import free_port

from neurondesk.collectors.flight_recorder import NodeDumps, dump_paths, read_dumps, request_dumps
from neurondesk.core.events import run_events as ev
from neurondesk.core.node.flight_recorder import (
    BlockedCollective,
    blocked_collectives,
    blocked_event,
    blocked_now,
    enabled,
    rank_lines,
    read_record,
)
from neurondesk.core.reduce.state import RunState
from neurondesk.sources.stacks import FlightRead, flight_text


def test_a_real_gloo_hang_names_the_blocked_collective_and_the_rank_behind(tmp_path) -> None:
    env = {**base_env(tmp_path), "TORCH_FR_BUFFER_SIZE": "64", "FR_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), str(DATA / "workloads" / "fr_gloo_hang.py")]
    p = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    dumps = read_dumps(dump_paths({"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "none_")}, tmp_path))
    assert dumps.problems == [] and [r.rank for r in dumps.records] == [0, 1]
    assert dumps.words("trn-07") == ("trn-07: rank 0 blocked in collective #4 gloo:all_reduce (Float [4]) of "
                                     "default_pg; rank 1 never reached it (last: #3)")


def test_a_dump_with_objects_or_a_link_is_refused(tmp_path) -> None:
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"entries": [], "pg_status": {}, "x": complex(1, 2)}))
    (tmp_path / "nccl_trace_rank_1").symlink_to(tmp_path / "nccl_trace_rank_0")
    (tmp_path / "nccl_trace_rank_2").write_bytes(pickle.dumps({"entries": [], "pg_status": {
        "0": {"last_enqueued_collective": "7", "last_completed_collective": "7"}}}))
    dumps = read_dumps(dump_paths({"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")}))
    assert [r.rank for r in dumps.records] == [2] and len(dumps.problems) == 2
    assert "holds no objects" in dumps.problems[0]
    assert dumps.words("n") is None  # nobody blocked


def test_each_rank_s_line_says_op_seq_group_and_state() -> None:
    """rank_lines on hand-made dumps shaped as torch 2.9's (a blocked rank, one behind, one off)."""
    def dump(enq: int, done: int, state: str = "scheduled") -> dict:
        entries = [{"collective_seq_id": n, "pg_id": 0, "process_group": ["0", "default_pg"], "state": state,
                    "profiling_name": "nccl:all_reduce", "input_sizes": [[8]], "input_dtypes": ["Float"],
                    "retired": n <= done} for n in range(1, enq + 1)]
        return {"entries": entries, "pg_status": {"0": {"last_enqueued_collective": str(enq),
                                                        "last_completed_collective": str(done)}}}
    records = [read_record(0, dump(412, 411, "started")), read_record(5, dump(411, 411)),
               read_record(7, {"entries": [], "pg_status": {}})]
    assert rank_lines(records) == [
        "rank 0: blocked in nccl:all_reduce #412 (Float [8]) of default_pg (state started, entered #412, completed #411)",
        "rank 5: never entered nccl:all_reduce #412 of default_pg (its last: #411, completed #411)",
        "rank 7: recorded no collective (TORCH_FR_BUFFER_SIZE unset in it?)"]
    [b] = blocked_collectives(records)
    assert (b.op, b.seq, b.group, b.state, b.ranks, b.never_entered, b.last) == (
        "nccl:all_reduce", 412, "default_pg", "started", (0,), (5,), (411,))


def test_a_blocked_collective_stands_until_a_step_ends_after_it() -> None:
    state = RunState()
    for e in (ev.RunStarted(t=1.0, run_id="r", command=["t.py"]), ev.StepEnded(t=2.0, pid=7, step=0, duration_s=0.5),
              blocked_event(10.0, [BlockedCollective("gloo:all_reduce", 4, "default_pg", "scheduled", "", (0,), (1,),
                                                     (3,))], "n: ...")):
        state.apply(e)
    assert blocked_now(state.flight()).never_entered == (1,)
    state.apply(ev.StepEnded(t=11.0, pid=7, step=1, duration_s=0.5))
    assert blocked_now(state.flight()) is None  # stepping again: no longer blocked


def test_flight_recorder_off_says_how_to_turn_it_on_and_a_probe_gone_is_one_problem(tmp_path) -> None:
    off = flight_text(FlightRead(False, NodeDumps(), "trn-07"))
    assert "TORCH_FR_BUFFER_SIZE=2000" in off and off.startswith("neurondesk: ") and off.count("\n") == 2
    assert enabled({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}) and not enabled({"TORCH_FR_BUFFER_SIZE": "0"})
    os.mkfifo(tmp_path / "fr-4242.fifo", 0o600)  # a FIFO nobody reads: its process has ended
    t0 = time.monotonic()
    got = request_dumps({4242: 3, 4343: 4}, str(tmp_path))  # 4343: no FIFO (the recorder off in it): left out
    assert got.records == [] and got.problems == ["rank 3 (pid 4242): no dump served (the process has ended?)"]
    assert time.monotonic() - t0 < 1.0
