"""summary.json as a typed contract (core/summary/types.py): the published schema is the structs' (its
script's check fails on a stale one), a real run's summary.json and every summary neurondesk builds
round-trip through the struct to the same bytes, a malformed or foreign file is one clear line, and a run
folder written by version 1 (tests/data/old_versions/v1_plain) is still read by `summary`, `compare`,
`reindex` and `history`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import HAS_XLA, REPO, TINY_MODEL, needs_xla, neurondesk_run

from neurondesk.core.summary.build import run_summary
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
from neurondesk.store.summary_files import read_summary

JOURNALS = REPO / "tests" / "data" / "journals"
V1 = REPO / "tests" / "data" / "old_versions" / "v1_plain"
ND = [str(Path(sys.executable).parent / "neurondesk")]


MAKE_SCHEMAS = REPO / "scripts" / "make_schemas.py"


def test_the_published_schema_is_the_one_the_structs_give() -> None:
    check = subprocess.run([sys.executable, str(MAKE_SCHEMAS), "--check"], capture_output=True, text=True,
                           timeout=120, cwd=REPO)
    assert check.returncode == 0, check.stderr  # "docs/summary.schema.json is stale: regenerate it with ..."
    published = json.loads((REPO / "docs" / "summary.schema.json").read_text())
    assert published == json.loads(json.dumps(summary_schema(), sort_keys=True))
    assert set(published["$defs"]["Summary"]["properties"]) == set(Summary.__struct_fields__)
    assert set(published["$defs"]["CompileRow"]["properties"]) >= {"cause", "duration_s", "after_warmup"}


def test_the_schema_check_names_a_stale_schema(tmp_path: Path) -> None:
    """The check itself can fail: on a copy of the repository's docs whose summary schema lost a field."""
    for part in ("scripts", "neurondesk"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    schema = json.loads((tmp_path / "docs" / "summary.schema.json").read_text())
    del schema["$defs"]["Summary"]["properties"]["steps"]
    (tmp_path / "docs" / "summary.schema.json").write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    check = subprocess.run([sys.executable, str(tmp_path / "scripts" / "make_schemas.py"), "--check"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert check.returncode == 1
    assert check.stderr == "docs/summary.schema.json is stale: regenerate it with `python scripts/make_schemas.py`\n"


@pytest.mark.parametrize("name", sorted(p.name for p in JOURNALS.iterdir() if p.is_dir()))
def test_every_built_summary_decodes_into_the_structs_unchanged(name: str) -> None:
    state, _ = state_from_run_dir(JOURNALS / name)
    typed = run_summary(state)
    written = to_json(typed)  # what the recorder writes
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
    assert figure_rows(old) == []


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


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """One real run (XLA on the CPU where torch-xla is here, else eager) that both real-run tests read:
    compiles, a value read and shape changes (advice, diagnostics), evaluation, the disk."""
    device = [] if HAS_XLA else ["--device", "cpu"]
    return neurondesk_run(tmp_path_factory.mktemp("real"), ["--preset", "demo", *TINY_MODEL, *device, "--steps", "12",
                                                            "--log-every", "4", "--dynamic-shape", "--graph-break",
                                                            "item", "--eval-every", "6", "--eval-batches", "2"])


def test_a_real_runs_summary_json_round_trips_through_the_struct_to_the_same_bytes(real_run) -> None:
    """summary.json of the real run read back by the contract and written again is the same text, key for key,
    in the same order."""
    run = real_run
    assert run.returncode == 0, run.stderr[-2000:]
    text = (run.run_dir / "summary.json").read_text()
    typed = read_summary(run.run_dir)
    assert typed is not None and typed.finished and typed.steps == 12
    assert to_json(typed) == text
    assert list(typed.as_dict()) == list(json.loads(text))  # the keys in summary.json's order
    assert typed.compiles and all(c.after_warmup is not None for c in typed.compiles)
    assert typed.disk is not None and typed.device_utilization is not None


@needs_xla
def test_the_summary_the_recorder_wrote_is_the_one_the_journal_rebuilds(real_run) -> None:
    """Built once at the end from the run's state: `neurondesk summary` of the folder, reduced from the journal
    again, gives the same figures (the notices journaled after it was written aside). The real run's compiles,
    shape changes and evaluation are all in both."""
    run = real_run
    assert run.returncode == 0, run.stderr[-2000:]
    written = read_summary(run.run_dir)
    state, _ = state_from_run_dir(run.run_dir)
    rebuilt = run_summary(state)
    assert written is not None and written.figures == rebuilt.figures
    assert msgspec.structs.replace(written, notices=[]) == msgspec.structs.replace(rebuilt, notices=[])


@pytest.mark.parametrize("content, words", [
    (b"{not json", "not JSON"),
    (b'{"summary_version": 0, "run_id": "r"}', "summary_version 0 is not one this neurondesk reads (1, 2): not a "
                                                "summary neurondesk wrote, or one from before version 1"),
    (b'{"summary_version": 3}', "a newer neurondesk wrote it: upgrade neurondesk"),
    (b'{"summary_version": 2, "compiles": [{"step": "one"}]}', "a field has the wrong type"),
])
def test_a_run_folders_malformed_or_foreign_summary_is_one_line_naming_the_file(tmp_path: Path, content: bytes,
                                                                               words: str) -> None:
    (tmp_path / "summary.json").write_bytes(content)
    with pytest.raises(SummaryError) as err:
        read_summary(tmp_path)
    said = str(err.value)
    assert said.startswith(f"{tmp_path / 'summary.json'}: ") and words in said and "\n" not in said


def test_a_summary_holding_a_lone_surrogate_is_refused_not_raised() -> None:
    """Found by benchmarks/fuzz.py (run_records): Python's json reads "\\ud800" into a str that msgspec, reading
    it as a number, cannot encode; the index and reindex hand such a dict to the contract."""
    doc = json.loads('{"summary_version": 2, "run_id": "r", "elapsed_s": "\\ud800"}')
    with pytest.raises(SummaryError, match="not Unicode"):
        load_summary(doc)
