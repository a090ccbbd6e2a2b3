"""torch.compile (dynamo, its "eager" backend: Inductor under the probe is the transparency corpus's) under the probe:
graph breaks are the user's, never ours."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import TRAIN, neurondesk_run

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed in this interpreter; `make test` installs it")


def test_graph_break_reported_at_the_workloads_line_and_probe_adds_none(tmp_path):
    # where dynamo breaks the graph is the case, not Inductor's C++: the "eager" backend
    run = neurondesk_run(tmp_path, ["--preset", "demo", "--device", "cpu", "--compile", "--graph-break", "item",
                                    "--compile-backend", "eager", "--steps", "8"])
    assert run.returncode == 0, run.stderr[-2000:]
    s = run.summary
    breaks = s["graph_breaks"]
    assert breaks, "the .item() inside the compiled function must show as a graph break"
    assert all("_neurondesk_probe" not in (b["location"] or "") for b in breaks)  # hooks traced as no-ops
    assert all(b["location"].startswith(str(TRAIN.parent)) for b in breaks)
    assert any("item()" in b["reason"] for b in breaks)
    assert breaks[0]["step"] == 0
    # the model's forward runs inside the compiled function, so samples come from the DataLoader batch
    assert s["steady"]["samples_per_s"] is not None and s["steady"]["tokens_per_s"] is not None
