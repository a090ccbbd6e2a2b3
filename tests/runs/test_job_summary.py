"""`neurondesk job summary|report|export` and `compare` of a job: real runs of two "nodes" (two short
`neurondesk run --headless` runs with torchrun's launch variables, node 1 slower and failing), merged.
The real multi-node torchrun job is tests/runs/test_fleet_multinode.py's; the bad inputs are real runs too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DATA, REPO, base_env

from neurondesk.core.events.job_identity import JobIdentity
from neurondesk.core.job.job_figures import job_figures
from neurondesk.core.job.job_summary import NodeRun, _figures, job_summary
from neurondesk.core.summary.types import Cost, Summary

WORKLOAD = DATA / "workloads" / "job_node.py"


def nd(*args, env=None, check=True):
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", *map(str, args)], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def node_run(tmp, folder, node, rank, job="j1", **extra):
    env = base_env(tmp / "home") | {"GROUP_RANK": str(rank), "GROUP_WORLD_SIZE": "2", "RANK": str(rank),
                                    "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "TORCHELASTIC_RUN_ID": job,
                                    "STEPS": "30", **extra}
    nd("run", "--headless", "--node", node, "--price-per-hour", "10", "--run-dir", folder, "--", sys.executable,
       WORKLOAD, env=env, check=False)
    assert (folder / "events.jsonl").exists()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("job")
    (tmp / "job").mkdir()
    node_run(tmp, tmp / "job" / "r0", "n0", 0)
    node_run(tmp, tmp / "job" / "r1", "n1", 1, SLEEP="0.03", FAIL="1")
    return tmp


def test_the_nodes_runs_merge_into_one_job_summary(job):
    out = json.loads(nd("job", "summary", job / "job", "--format", "json").stdout)
    assert out["job_summary_version"] == 1 and out["job_id"] == "j1" and out["launcher"] == "torchrun"
    assert [(n["node"], n["node_rank"], n["ranks"]) for n in out["nodes"]] == [("n0", 0, [0]), ("n1", 1, [1])]
    f = out["figures"]
    assert f["nodes"] == 2 and f["price_per_hour"] == pytest.approx(20.0)  # every node's price
    # the job goes at its slowest node's pace: node n1 sleeps 3x as long a step
    assert f["step_time_s"] == pytest.approx(out["nodes"][1]["step_time_s"])
    assert out["nodes"][1]["step_time_s"] > out["nodes"][0]["step_time_s"]
    assert f["total_usd"] == pytest.approx(sum(n["total_usd"] for n in out["nodes"]))
    fail = out["first_failure"]
    assert fail["node"] == "n1" and "RuntimeError: boom on this node" in fail["what"] and out["exit_code"] == 1
    text = nd("job", "summary", job / "job" / "r0", job / "job" / "r1", "--format", "text").stdout
    assert "failed first: rank 1 on node n1" in text and text.startswith("job j1: 2 node(s), 2 rank(s)")


def test_the_job_report_and_trace_have_the_job_and_a_group_per_node(job):
    nd("job", "report", job / "job", "-o", job / "job.html")
    page = (job / "job.html").read_text()
    assert 'id="job"' in page and "Job j1" in page and page.count('<section id="run-') == 2
    nd("job", "export", job / "job", "-o", job / "job.trace.json")
    trace = json.loads((job / "job.trace.json").read_text())["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    assert sorted(procs.values()) == ["node n0 (node rank 0)", "node n1 (node rank 1)"]
    steps = {procs[e["pid"]] for e in trace if e.get("cat") == "step"}
    assert steps == set(procs.values())  # each node's steps in its own group
    threads = {e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    assert any(t.startswith("rank 1 · steps") for t in threads)
    assert any(e.get("cat") == "failure" and "n1" in e["name"] for e in trace)


def test_compare_takes_a_job_folder_and_a_job_summary_file(job):
    nd("job", "summary", job / "job", "--format", "json", "-o", job / "job.json")
    for other in (job / "job.json", job / "job"):
        out = json.loads(nd("compare", job / "job" / "r0", other, "--format", "json").stdout)
        assert out["runs"][1]["run_id"] == "job j1"
        price = next(r for r in out["rows"] if r["key"] == "price_per_hour")["values"]
        assert price == [pytest.approx(10.0), pytest.approx(20.0)]


def test_another_jobs_run_and_a_node_given_twice_are_refused(job, tmp_path):
    node_run(job, tmp_path / "other", "n2", 0, job="j2")
    p = nd("job", "summary", job / "job", tmp_path / "other", check=False)
    assert p.returncode == 2 and "belong to 2 jobs" in p.stderr and "--job ID" in p.stderr
    p = nd("job", "summary", job / "job", tmp_path / "other", "--job", "j1", "--format", "json")
    assert [n["node"] for n in json.loads(p.stdout)["nodes"]] == ["n0", "n1"] and "left out 1 run(s) of job 'j2'" in p.stderr
    for name in ("none-a", "none-b"):  # torchrun's default run id names no job: a node given twice is refused
        node_run(job, tmp_path / name, "n0", 0, job="none")
    p = nd("job", "summary", tmp_path / "none-a", tmp_path / "none-b", check=False)
    assert p.returncode == 2 and "node 'n0' has 2 runs" in p.stderr and "same --job" in p.stderr


def test_a_relaunch_of_a_named_job_is_an_attempt_of_its_node(job, tmp_path):
    """The same job id launched again on node n0 (a requeue): its latest run is the node's, the earlier one
    counts in the job's goodput as a relaunch (docs/goodput.md)."""
    node_run(job, tmp_path / "again", "n0", 0)
    p = nd("job", "summary", job / "job", tmp_path / "again", "--format", "json")
    out = json.loads(p.stdout)
    assert [n["node"] for n in out["nodes"]] == ["n0", "n1"] and "relaunches of the job" in p.stderr
    assert out["nodes"][0]["run_dir"] == str(tmp_path / "again")
    g = out["goodput"]
    assert (g["relaunches"], g["restarts"]) == (1, 1) and g["wall_s"] > sum(n["elapsed_s"] for n in out["nodes"])


def _summary(node, node_rank, nodes=4, precision="bf16", steps=100, price=10.0, compile_s=5.0):
    return Summary(summary_version=2, run_id=f"run-{node}", steps=steps, precision=precision,
                   compile_total_s=compile_s, elapsed_s=100.0,
                   cost=Cost(price_per_hour=price, total_usd=price * 100 / 3600),
                   job=JobIdentity(job_id="j", node=node, node_rank=node_rank, nodes=nodes, ranks=[node_rank]))


def test_what_does_not_fit_is_said_and_the_figures_are_job_figures():
    runs = [NodeRun(run_dir=f"/r{i}", summary=s) for i, s in enumerate(
        [_summary("a", 0), _summary("b", 0, precision="fp32", compile_s=30.0)])]
    j = job_summary(runs)
    assert j.figures == job_figures([_figures(n) for n in sorted(runs, key=lambda n: n.summary.job.node)])
    assert j.figures.compile_wall_s == 30.0 and j.figures.compile_wait_s == 25.0 and j.compile_slowest_node == "b"
    words = " ".join(j.problems)
    assert "2 of the job's 4 nodes given" in words and "both say node rank 0" in words
    assert "precision differs between nodes" in words and "global rank 0 ran on both" in words
    assert j.first_failure is None and j.slowest is None


def test_the_published_job_summary_schema_is_the_structs():
    from pathlib import Path

    from neurondesk.core.job.job_summary import job_summary_schema

    published = json.loads((Path(REPO) / "docs" / "job-summary.schema.json").read_text())
    assert published == json.loads(json.dumps(job_summary_schema())), "regenerate docs/job-summary.schema.json"
    check = subprocess.run([sys.executable, str(Path(REPO) / "scripts" / "make_schemas.py"), "--check"],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert check.returncode == 0, check.stderr  # the script that writes it finds it current
