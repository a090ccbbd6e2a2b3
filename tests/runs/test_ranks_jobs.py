"""Many ranks, real `torchrun` jobs of the bundled workload: a clean job, a crash on one rank, an XLA
job whose ranks compile differently. (Stragglers and the synthetic reducer tests are in
test_ranks.py; two files so the test workers share these long runs.)"""

from __future__ import annotations

from conftest import TINY_MODEL, needs_xla
from test_ranks import torchrun_job


def test_a_clean_job_names_no_straggler_and_counts_the_job_once(tmp_path):
    # two ranks: four on this 2-core machine share cores unevenly with the recorder, and a rank
    # that really gets less CPU is a real straggler, not what this test is about
    run = torchrun_job(tmp_path, 2, "--steps", "40")
    assert run.returncode == 0, run.stderr[-3000:]
    s = run.summary
    assert s["stragglers"] == [] and s["failed_rank"] is None
    assert s["steps"] == 40 and [r["steps"] for r in s["ranks"]] == [40, 40]


def test_the_rank_that_crashed_first_is_named_with_its_traceback(tmp_path):
    run = torchrun_job(tmp_path, 4, "--steps", "30", "--crash-at-step", "12", "--crash-rank", "1")
    assert run.returncode != 0
    failed = run.summary["failed_rank"]
    assert failed["rank"] == 1
    assert failed["error"] == "RuntimeError: crash requested at step 12 on rank 1 (--crash-at-step)"
    assert any("train.py" in line for line in failed["traceback"])
    assert "rank 1" in run.stderr and "crash requested at step 12" in run.stderr


@needs_xla
def test_a_recompile_on_one_xla_rank_only_is_marked_and_each_graph_is_one_row(tmp_path):
    run = torchrun_job(tmp_path, 2, "--steps", "8", "--rank-dynamic-shape", "1", *TINY_MODEL, device="xla")
    assert run.returncode == 0, run.stderr[-3000:]
    s = run.summary
    shared = [c for c in s["compiles"] if sorted(c["ranks"]) == [0, 1]]
    alone = [c for c in s["compiles"] if c["ranks"] == [1]]
    assert shared, s["compiles"]  # the graphs both ranks compiled: one row each, not two
    assert any(c["cause"] == "shape-change" for c in alone)
    assert not [c for c in s["compiles"] if c["ranks"] == [0] and c["cause"] == "shape-change"]
    per_rank = {r["rank"]: r for r in s["ranks"]}
    assert per_rank[1]["recompiles_after_warmup"] > per_rank[0]["recompiles_after_warmup"] == 0
