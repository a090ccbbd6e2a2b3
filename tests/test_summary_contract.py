"""summary.json as a typed contract (core/summary/types.py): the published schema matches the
structs, every summary neurondesk builds decodes back into them, and a run folder written by
version 1 (tests/data/old_versions/v1_plain) is still read by `summary`, `compare`, `reindex` and
`history`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import REPO

from neurondesk.core.summary.build import build_summary, run_summary
from neurondesk.core.summary.types import (
    READABLE_VERSIONS,
    SUMMARY_VERSION,
    Summary,
    SummaryError,
    load_summary,
    summary_schema,
)
from neurondesk.reports.summary_writer import figure_rows, to_json
from neurondesk.sources.rebuild import state_from_run_dir

JOURNALS = REPO / "tests" / "data" / "journals"
V1 = REPO / "tests" / "data" / "old_versions" / "v1_plain"
ND = [str(Path(sys.executable).parent / "neurondesk")]


def test_the_published_schema_is_the_one_the_structs_give() -> None:
    published = json.loads((REPO / "docs" / "summary.schema.json").read_text())
    assert published == json.loads(json.dumps(summary_schema(), sort_keys=True)), (
        "docs/summary.schema.json is stale: regenerate it with "
        "python -c \"import json; from neurondesk.core.summary.types import summary_schema; "
        "open('docs/summary.schema.json','w').write(json.dumps(summary_schema(), indent=2, sort_keys=True)+'\\n')\"")
    assert set(published["$defs"]["Summary"]["properties"]) == set(Summary.__struct_fields__)


@pytest.mark.parametrize("name", sorted(p.name for p in JOURNALS.iterdir() if p.is_dir()))
def test_every_built_summary_decodes_into_the_structs_unchanged(name: str) -> None:
    state, _ = state_from_run_dir(JOURNALS / name)
    typed = run_summary(state)
    written = to_json(build_summary(state))  # what the recorder writes
    back = load_summary(written.encode())
    assert back.summary_version == SUMMARY_VERSION
    assert back == msgspec.convert(json.loads(written), Summary)
    assert back.figures is not None and back.figures.steps == typed.steps == state.steps_done
    # the sections published in version 1 hold the figures' own values
    assert back.cost.per_1k_steps_steady_usd == pytest.approx(back.figures.per_1k_steps_steady_usd, abs=1e-6)
    assert back.steady.step_time_s == pytest.approx(back.figures.step_time_s, abs=1e-6)


def test_a_version_1_summary_is_read_and_shows_no_figure_it_never_had() -> None:
    raw = (V1 / "summary.json").read_bytes()
    old = load_summary(raw)
    assert old.summary_version == 1 and old.figures is None
    assert old.steps == json.loads(raw)["steps"] > 0
    assert old.cost.total_usd == json.loads(raw)["cost"]["total_usd"]
    assert figure_rows(old.as_dict()) == []


@pytest.mark.parametrize("bad, words", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"summary_version": 99}', "summary_version 99"),
    (b'{"summary_version": 2, "steps": "many"}', "wrong type"),
])
def test_a_summary_that_is_no_summary_is_one_clear_error(bad: bytes, words: str) -> None:
    with pytest.raises(SummaryError) as err:
        load_summary(bad)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert READABLE_VERSIONS == (1, 2)


def test_commands_read_a_run_folder_written_by_version_1(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runs = home / "runs"
    runs.mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    old = runs / "v1"
    shutil.copytree(V1, old)
    os.chmod(old, 0o700)
    for f in old.iterdir():
        f.chmod(0o600)
    env = {**os.environ, "NEURONDESK_HOME": str(home)}

    def nd(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*ND, *args], capture_output=True, text=True, timeout=300, env=env)

    summary = nd("summary", str(old), "--format", "json")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["steps"] == json.loads((V1 / "summary.json").read_text())["steps"]
    compare = nd("compare", str(old), str(JOURNALS / "plain"))
    assert compare.returncode == 0, compare.stderr
    assert "steady step time" in compare.stdout
    reindex = nd("reindex")
    assert reindex.returncode == 0, reindex.stderr
    history = nd("history", "--format", "json")
    assert history.returncode == 0, history.stderr
    assert any(r.get("steps") == json.loads((V1 / "summary.json").read_text())["steps"]
               for r in json.loads(history.stdout)), history.stdout
