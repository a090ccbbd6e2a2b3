"""Which processes' checkpoints are seen (issue 53 item 16, docs/checkpoints.md "Child processes"): a
child started by fork (or by a forkserver, which forks it) has the parent's probe switched off (a forked
DataLoader worker shares the parent's socket and must stay silent), so its torch.save is not recorded; a
spawned child is a new interpreter with a probe of its own, and its save is. A real run of the three."""

from __future__ import annotations

import json

from tests.conftest import REPO, neurondesk_run

SCRIPT = REPO / "tests" / "checkpoint_scripts" / "child_saves.py"


def test_a_forked_childs_save_is_not_seen_and_a_spawned_childs_is(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run = neurondesk_run(tmp_path, [str(out)], workload=SCRIPT)
    assert run.returncode == 0, run.stderr[-2000:]
    stdout = (run.run_dir / "stdout.log").read_text()
    children = {c["method"]: c for c in (json.loads(line[6:]) for line in stdout.splitlines()
                                         if line.startswith("child:"))}
    assert {m: c["exitcode"] for m, c in children.items()} == {"fork": 0, "spawn": 0, "forkserver": 0}
    assert all((out / f"{m}.pt").is_file() for m in children)  # every child saved
    saved_by = {e["pid"] for e in run.events if e["kind"] == "checkpoint" and e["op"] == "save"}
    assert children["spawn"]["pid"] in saved_by
    assert children["fork"]["pid"] not in saved_by and children["forkserver"]["pid"] not in saved_by
    assert len(saved_by) == 2  # the parent's and the spawned child's
