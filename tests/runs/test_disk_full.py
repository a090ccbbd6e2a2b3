"""Disk full during a run: nothing recorded is lost. The unwritten journal stays in memory
(bounded), then moves to a fallback folder with a full copy of the summary; `neurondesk summary
FALLBACK` rebuilds the whole run.

The end-to-end test makes the disk "full" with a real kernel limit: RLIMIT_FSIZE (with SIGXFSZ
ignored, writes past the limit fail with EFBIG, as they fail with ENOSPC on a full disk)."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, base_env

from neurondesk.core.events import run_events as ev
from neurondesk.recorder.options import RunOptions
from neurondesk.recorder.recorder import Recorder
from neurondesk.sources.rebuild import summary_from_run_dir
from neurondesk.store.fallback import (
    REMAINDER_FILE,
    FallbackInfo,
    make_fallback_dir,
    open_whole_journal,
    read_fallback_info,
    write_fallback_info,
)
from neurondesk.store.journal import JournalWriter, iter_journal_stream
from neurondesk.store.own_files import FileId
from neurondesk.store.rundir import RunPaths

LOUD_THEN_STEPS = REPO / "tests" / "data" / "workloads" / "loud_then_steps.py"
# The workload's first 40 lines (60,000 characters each, one output event each, half of them on
# stderr: stdout.log and stderr.log are under the limit too) fill the run folder's journal past
# the limit at once (2.4 MB of events); what comes after (a few lines, the steps, and the host
# and disk samples, whose number grows with the run's wall time) goes to the fallback folder, under
# the same limit. The samples are about 1 KiB a second: on a machine so busy that the run takes
# minutes the remainder still fits (it was 24 KiB of steps and samples both: under load the
# samples alone passed the limit, the fallback filled too, and the run's end was written nowhere).
LINES = 40
STEPS = 220
LIMIT_BYTES = 2 << 20


def _full_disk_at_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # stays ignored across exec: writes fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))


def _env(tmp_path: Path) -> dict[str, str]:
    env = base_env(tmp_path / "home")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # the user data folder: no fallback there, NEURONDESK_HOME is set
    return env


def test_disk_full_run_loses_nothing_and_summary_of_the_fallback_rebuilds_it(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
           "--", sys.executable, str(LOUD_THEN_STEPS), str(LINES), str(STEPS), "5"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(tmp_path), cwd=REPO,
                       preexec_fn=_full_disk_at_limit)
    assert p.returncode == 5, p.stderr  # the workload's own exit status
    fallback = tmp_path / "home" / "fallback" / "run"  # $NEURONDESK_HOME/fallback/<run id>
    assert f"rebuild the whole run with `neurondesk summary {fallback}`" in p.stderr
    assert re.search(rf"^ *steps +{STEPS}\b", p.stdout, re.M)  # the summary printed at the end is complete

    on_disk = (run_dir / "events.jsonl").read_bytes()
    assert len(on_disk) == LIMIT_BYTES and on_disk.count(b'"kind":"step"') < STEPS  # the disk did fill
    assert not list(run_dir.glob("*.tmp"))
    info = read_fallback_info(fallback)
    assert (info.run_dir, info.journal_bytes_in_run_dir) == (str(run_dir), LIMIT_BYTES)
    copy = json.loads((fallback / "summary.json").read_text())
    assert (copy["steps"], copy["exit_code"], copy["finished"]) == (STEPS, 5, True)

    rebuilt = subprocess.run([sys.executable, "-m", "neurondesk.cli", "summary", str(fallback), "--format", "json"],
                             capture_output=True, text=True, timeout=60, env=_env(tmp_path), cwd=REPO)
    assert rebuilt.returncode == 0, rebuilt.stderr
    whole = json.loads(rebuilt.stdout)
    assert (whole["steps"], whole["exit_code"], whole["finished"]) == (STEPS, 5, True)
    # the run folder itself, summed up, finds its fallback too
    monkeypatch.setenv("NEURONDESK_HOME", str(tmp_path / "home"))
    assert summary_from_run_dir(run_dir)[0].steps == STEPS


def test_events_over_the_memory_bound_move_to_the_fallback_folder_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    paths = RunPaths(tmp_path / "run")
    paths.dir.mkdir()
    rec = Recorder(["train"], RunOptions(run_root=tmp_path / "home"), paths)
    rec.run_journal.writer = JournalWriter("/dev/full", flush_interval_s=0.0,  # every write: ENOSPC
                                           continues=FileId.of(os.stat("/dev/full")))
    rec.run_journal.disk.max_pending_bytes = 4096
    rec.record(ev.RunStarted(t=1.0, run_id="run", command=["train"], cwd="/", host="h"))
    for i in range(100):
        rec.record(ev.StepEnded(t=2.0 + i, pid=7, step=i, duration_s=0.1))
    assert rec.run_journal.writer.diverted and rec.run_journal.writer.pending_bytes == 0  # in the fallback, not in memory
    rec.record(ev.RunFinished(t=200.0, exit_code=0))
    rec.finish()
    folder = rec.run_journal.fallback
    assert folder == tmp_path / "xdg" / "neurondesk" / "fallback" / "run"
    remainder = (folder / REMAINDER_FILE).read_bytes()
    assert remainder.count(b'"kind":"step"') == 100 and b'"kind":"run_finished"' in remainder
    assert json.loads((folder / "summary.json").read_text())["steps"] == 100


def test_whole_journal_joins_a_line_cut_where_the_disk_filled(tmp_path):
    lines = [b'{"kind":"step","t":1.0,"pid":7,"step":1,"duration_s":0.1}\n', b'{"kind":"step","t":2.0,"pid":7,"step":2,"duration_s":0.1}\n']
    whole = b"".join(lines)
    cut = len(lines[0]) + 10  # mid-way through the second line
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "events.jsonl").write_bytes(whole[:cut] + b"garbage written later, past the record")
    folder = tmp_path / "fallback"
    folder.mkdir()
    (folder / REMAINDER_FILE).write_bytes(whole[cut:])
    write_fallback_info(folder, FallbackInfo("run", str(run_dir), cut))
    stream, warning = open_whole_journal(folder)
    problems: list = []
    with stream:
        steps = [e.step for e in iter_journal_stream(stream, problems)]
    assert (steps, problems, warning) == ([1, 2], [], None)


def test_whole_journal_without_its_run_folder_part_says_so_and_replays_the_rest(tmp_path):
    folder = tmp_path / "fallback"
    folder.mkdir()
    (folder / REMAINDER_FILE).write_bytes(b'{"kind":"step","t":2.0,"pid":7,"step":2,"duration_s":0.1}\n')
    write_fallback_info(folder, FallbackInfo("run", str(tmp_path / "gone"), 500))
    stream, warning = open_whole_journal(folder)
    with stream:
        assert [e.step for e in iter_journal_stream(stream, [])] == [2]
    assert "cannot be read" in warning and "summary.json" in warning


def test_a_run_whose_journal_fills_its_fallback_too_ends_with_the_workloads_status_and_the_recorders_summary(tmp_path):
    """Issue 24 item 14: under load the old test's fallback filled too, the run's end was written
    nowhere, and the viewer said the recorder had stopped before the workload ended (exit 1). The
    recorder had not stopped: it wrote the whole summary (small files still fit) and exited. One
    60,000-character line is more than the run folder and the fallback can take under this limit."""
    limit = 40 * 1024

    def full_everywhere() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
           "--", sys.executable, str(LOUD_THEN_STEPS), "2", str(STEPS), "5"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(tmp_path), cwd=REPO,
                       preexec_fn=full_everywhere)
    assert p.returncode == 5, p.stderr  # the workload's own exit status, from the recorder's summary
    assert "before the workload ended" not in p.stderr
    assert "the journal could not be written to its end" in p.stderr, p.stderr
    assert re.search(rf"^ *steps +{STEPS}\b", p.stdout, re.M)  # the recorder's summary, whole
    fallback = tmp_path / "home" / "fallback" / "run"  # $NEURONDESK_HOME/fallback/<run id>
    assert (fallback / REMAINDER_FILE).stat().st_size == limit  # it did fill


def test_two_runs_whose_folders_share_a_name_on_full_disks_get_a_fallback_each(tmp_path):
    """Issue 34 item 1: `--run-dir A/run`, then `--run-dir B/run`, each on a real disk that fills
    (a 1 MiB tmpfs mounted for the test): each run goes on in a fallback folder of its own, named
    by its unique run id ($NEURONDESK_HOME/fallback/<id>); each rebuilds its own run alone. Before,
    both continued `fallback/run`, and its summary mixed them."""
    disks = [tmp_path / "a", tmp_path / "b"]
    mounted = []
    try:
        for d in disks:
            d.mkdir(mode=0o700)
            m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(d)],
                               capture_output=True, text=True)
            if m.returncode != 0:
                pytest.skip(f"a tmpfs cannot be mounted here ({m.stderr.strip()[:120]}): needs root")
            mounted.append(d)
        env = base_env(tmp_path / "home")
        runs = []
        for d, steps in zip(disks, (30, 45), strict=True):
            cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(d / "run"),
                   "--", sys.executable, str(LOUD_THEN_STEPS), "24", str(steps), "0"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
            assert p.returncode == 0, p.stderr[-2000:]
            runs.append(steps)
        folders = sorted((tmp_path / "home" / "fallback").iterdir())
        assert len(folders) == 2, folders
        seen = {}
        for folder in folders:
            info = read_fallback_info(folder)
            assert info.run_id == folder.name  # it names itself: the run's unique id
            rebuilt = subprocess.run([sys.executable, "-m", "neurondesk.cli", "summary", str(folder), "--format", "json"],
                                     capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
            assert rebuilt.returncode == 0, rebuilt.stderr
            assert "not JSON" not in rebuilt.stderr, rebuilt.stderr
            whole = json.loads(rebuilt.stdout)
            assert whole["run_id"] == info.run_id
            seen[info.run_dir] = whole["steps"]
        assert seen == {str(disks[0] / "run"): 30, str(disks[1] / "run"): 45}
    finally:
        for d in mounted:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_a_fallback_folder_holding_another_runs_record_is_never_continued(tmp_path):
    root = tmp_path / "fallback"
    root.mkdir(mode=0o700)
    theirs = root / "run"
    theirs.mkdir(mode=0o700)
    write_fallback_info(theirs, FallbackInfo("run", str(tmp_path / "elsewhere" / "run"), 10))
    (tmp_path / "mine").mkdir()
    folder = make_fallback_dir(tmp_path / "mine" / "run", roots=[root], run_id="run")
    assert folder != theirs and read_fallback_info(theirs).run_dir == str(tmp_path / "elsewhere" / "run")
    again = make_fallback_dir(tmp_path / "elsewhere" / "run", roots=[root], run_id="run")
    assert again == theirs  # its own run, later in that run: continued
