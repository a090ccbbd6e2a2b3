"""PyTorch's Flight Recorder on a real torchrun/gloo hang (torch 2.9 on the CPU): the blocked
collective and the rank that never reached it, per node (issue 33 item 8); a dump that is not
plain data is refused without running anything."""

from __future__ import annotations

import pickle
import subprocess
import sys

from conftest import DATA, REPO, base_env
from prometheus_harness import free_port

from neurondesk.collectors.flight_recorder import dump_paths, read_dumps


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
