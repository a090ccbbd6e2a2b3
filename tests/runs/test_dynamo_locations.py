"""Every dynamo compile names the user's line (issue 13 item 10): the first forward compile at the
call of the compiled model, the lazily compiled backward at ``loss.backward()``, also when
autograd runs that backward on its own device thread (XLA)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import DATA, base_env, neurondesk_run

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed in this interpreter; `make test` installs it")

SCRIPT = DATA / "workloads" / "compiled_backward.py"


def _line(marker: str) -> str:
    n = next(i for i, x in enumerate(SCRIPT.read_text().splitlines(), 1) if x.endswith(f"# {marker}"))
    return f"{SCRIPT}:{n}"


def _dynamo_compiles(run_dir: Path) -> dict[str, str | None]:
    out = {}
    for raw in (run_dir / "events.jsonl").read_text().splitlines():
        e = json.loads(raw)
        if e.get("kind") == "compile" and e.get("source") == "dynamo":
            out.setdefault(e["point"].rsplit(":", 1)[-1], e.get("location"))
    return out


@pytest.mark.parametrize("backend", [
    "aot_eager",
    pytest.param("openxla", marks=pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None,
                                                     reason="torch_xla is not installed")),
])
def test_first_and_lazy_backward_compiles_have_the_users_line(tmp_path, backend):
    run = neurondesk_run(tmp_path, [backend], workload=SCRIPT, env=base_env(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    found = _dynamo_compiles(tmp_path / "run")
    assert found.get("DYNAMO") == _line("FORWARD"), found
    assert found.get("LAZY_BACKWARD") == _line("BACKWARD"), found
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["loss"]["last"] == 0.1234  # 'Final loss is X' is the last loss
