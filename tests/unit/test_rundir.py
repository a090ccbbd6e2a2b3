from datetime import datetime
from pathlib import Path

import pytest

from neurondesk.store.rundir import RunPaths, create_run_dir, default_run_root, make_run_id


def test_default_root_and_override():
    assert default_run_root({"NEURONDESK_HOME": "/srv/nd"}) == Path("/srv/nd/runs")
    root = default_run_root({})
    assert root.name == "runs" and "neurondesk" in str(root)


def test_run_id_from_the_given_time():
    rid = make_run_id(datetime(2026, 3, 4, 5, 6, 7))
    assert rid.startswith("20260304-050607-") and len(rid) == 20
    int(rid[-4:], 16)
    assert make_run_id(datetime(2026, 3, 4, 5, 6, 7), "beef") == "20260304-050607-beef"


def test_create_run_dir(tmp_path):
    paths = create_run_dir(tmp_path / "runs", "20260304-050607-beef")
    assert paths.dir.is_dir()
    assert [p.name for p in (paths.events, paths.summary_json, paths.summary_md, paths.stdout_log,
                             paths.stderr_log, paths.recorder_lock)] == [
        "events.jsonl",
        "summary.json",
        "summary.md",
        "stdout.log",
        "stderr.log",
        "recorder.lock",
    ]
    with pytest.raises(FileExistsError):
        create_run_dir(tmp_path / "runs", "20260304-050607-beef")
    with pytest.raises(ValueError, match="invalid run id"):
        create_run_dir(tmp_path / "runs", "../escape")


def test_run_folders_are_private(tmp_path):
    paths = create_run_dir(tmp_path / "runs", "20260304-050607-beef")
    assert paths.dir.stat().st_mode & 0o777 == 0o700


def test_a_run_dir_holding_a_run_is_refused_unless_forced_then_its_files_move_aside(tmp_path):
    from neurondesk.recorder.options import RunOptions
    from neurondesk.sources.launch import make_run_paths

    fresh = make_run_paths(RunOptions(run_dir=tmp_path / "new"))
    assert fresh.dir.stat().st_mode & 0o777 == 0o700
    d = tmp_path / "r"
    d.mkdir()
    (d / "events.jsonl").write_text("old\n")
    (d / "summary.json").write_text("{}")
    (d / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="already holds a run.*--force"):
        make_run_paths(RunOptions(run_dir=d))
    assert make_run_paths(RunOptions(run_dir=d, force=True)).dir == d
    assert not (d / "events.jsonl").exists() and (d / "notes.txt").read_text() == "mine"
    [aside] = d.glob("previous-*")
    assert (aside / "events.jsonl").read_text() == "old\n" and (aside / "summary.json").exists()
    assert aside.stat().st_mode & 0o777 == 0o700


def test_a_planted_journal_symlink_counts_as_a_run_and_is_moved_not_followed(tmp_path):
    from neurondesk.recorder.options import RunOptions
    from neurondesk.sources.launch import make_run_paths

    d, target = tmp_path / "r", tmp_path / "victim"
    d.mkdir()
    target.write_text("precious")
    (d / "events.jsonl").symlink_to(target)
    with pytest.raises(FileExistsError):
        make_run_paths(RunOptions(run_dir=d))
    make_run_paths(RunOptions(run_dir=d, force=True))
    [aside] = d.glob("previous-*")
    assert (aside / "events.jsonl").is_symlink() and target.read_text() == "precious"


def test_a_planted_summary_tmp_symlink_is_not_followed(tmp_path):
    from neurondesk.store.summary_files import write_summary_files

    target = tmp_path / "victim"
    target.write_text("precious")
    (tmp_path / "summary.json.tmp").symlink_to(target)
    write_summary_files(RunPaths(tmp_path), "{}", "# x")  # the link is dropped, never written through
    assert target.read_text() == "precious"
    assert (tmp_path / "summary.json").read_text() == "{}" and not (tmp_path / "summary.json").is_symlink()


def _rotated_journal(d: Path, source: str, n: int = 200) -> None:
    """A real journal whose writer closed segments as it grew (events.NNNNNN.jsonl.zst beside it)."""
    from neurondesk.core.events import run_events as ev
    from neurondesk.store.journal import JournalWriter

    w = JournalWriter(RunPaths(d).events, segment_bytes=2000)
    for i in range(n):
        w.write(ev.Notice(t=float(i), level="info", source=source, message=f"{source} {i}"))
        w.flush()
    w.close()


def test_forcing_a_folder_whose_journal_rotated_starts_a_new_journal_not_the_old_ones_next_segment(tmp_path):
    """--force moved events.jsonl aside but left the closed segments: the new run's journal went on
    numbering after them and every reader took the old run's events for the new run's."""
    from neurondesk.core.events import run_events as ev
    from neurondesk.recorder.options import RunOptions
    from neurondesk.sources.launch import make_run_paths
    from neurondesk.store.journal import JournalWriter, iter_journal

    d = tmp_path / "r"
    d.mkdir(mode=0o700)
    _rotated_journal(d, "old")
    assert RunPaths(d).journal_segments()
    paths = make_run_paths(RunOptions(run_dir=d, force=True))
    assert paths.journal_segments() == [] and paths.grown_files() == []
    w = JournalWriter(paths.events)
    w.write(ev.Notice(t=1000.0, level="info", source="new", message="new 0"))
    w.close()
    assert [e.source for e in iter_journal(paths.events, [])] == ["new"]
    [aside] = d.glob("previous-*")
    assert len(list(iter_journal(RunPaths(aside).events, []))) == 200  # the old run whole, beside


def test_closed_segments_alone_are_a_run_and_stale_checkpoints_are_moved_aside(tmp_path):
    from neurondesk.recorder.options import RunOptions
    from neurondesk.sources.launch import make_run_paths

    d = tmp_path / "r"
    d.mkdir(mode=0o700)
    _rotated_journal(d, "old")
    RunPaths(d).events.unlink()  # the live file lost: what is left is still a journal
    with pytest.raises(FileExistsError, match="already holds a run"):
        make_run_paths(RunOptions(run_dir=d))
    e = tmp_path / "e"
    e.mkdir(mode=0o700)
    for p in (RunPaths(e).checkpoint, RunPaths(e).segment_checkpoint(3)):
        p.write_bytes(b"of another journal")
        p.chmod(0o600)
    assert make_run_paths(RunOptions(run_dir=e)).grown_files() == []  # ours, and of no use: moved aside
    [aside] = e.glob("previous-*")
    assert sorted(p.name for p in aside.iterdir()) == ["checkpoint.000003.bin", "checkpoint.bin"]
