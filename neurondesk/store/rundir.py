"""Where runs live: ``<root>/<run id>/`` with a fixed set of file names, and the index beside them.

The root is ``$NEURONDESK_HOME/runs`` when that is set, else ``user_data_dir("neurondesk")/runs``.
Run ids sort by time: ``YYYYmmdd-HHMMSS-<4 hex>``, from a datetime the caller passes in.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import platformdirs

HOME_ENV = "NEURONDESK_HOME"
EVENTS_FILE = "events.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
STDOUT_LOG = "stdout.log"  # the workload writes its output here itself: no pipe to a process that can die
STDERR_LOG = "stderr.log"
RECORDER_INFO = "recorder.json"  # pid and control socket of the recorder that owns the run
RECORDER_LOCK = "recorder.lock"  # held (flock) by that recorder for as long as it lives
RECORDER_LOG = "recorder.log"  # the recorder's own stderr: a crash of neurondesk itself lands here
INDEX_FILE = "runs.sqlite"  # in the run root
LIVE_DIR = "live"  # beside the run root: one entry per live run, wherever its folder is (store/live_registry.py)


def default_run_root(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    home = env.get(HOME_ENV, "").strip()
    base = Path(home).expanduser() if home else Path(platformdirs.user_data_dir("neurondesk"))
    return base / "runs"


def make_run_id(now: datetime, suffix: str | None = None) -> str:
    """``now`` formatted as given (pass local time for ids people read); 4 random hex digits
    unless ``suffix`` is given (tests)."""
    return f"{now:%Y%m%d-%H%M%S}-{suffix if suffix is not None else secrets.token_hex(2)}"


@dataclass(frozen=True)
class RunPaths:
    dir: Path

    @property
    def events(self) -> Path:
        return self.dir / EVENTS_FILE

    @property
    def summary_json(self) -> Path:
        return self.dir / SUMMARY_JSON

    @property
    def summary_md(self) -> Path:
        return self.dir / SUMMARY_MD

    @property
    def stdout_log(self) -> Path:
        return self.dir / STDOUT_LOG

    @property
    def stderr_log(self) -> Path:
        return self.dir / STDERR_LOG

    @property
    def recorder_info(self) -> Path:
        return self.dir / RECORDER_INFO

    @property
    def recorder_lock(self) -> Path:
        return self.dir / RECORDER_LOCK

    @property
    def recorder_log(self) -> Path:
        return self.dir / RECORDER_LOG


def create_run_dir(root: Path, run_id: str) -> RunPaths:
    """Make ``root/run_id`` (and root). Raises FileExistsError if that run exists already,
    ValueError for an id that is not a single plain path component."""
    if not run_id or run_id in (".", "..") or "/" in run_id or os.sep in run_id:
        raise ValueError(f"invalid run id {run_id!r}: expected a plain name like 20260101-120000-ab12")
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    d = root / run_id
    d.mkdir(mode=0o700)  # a run's command line, output and costs are its owner's alone
    return RunPaths(d)


# The files that say a folder holds a run; a --run-dir with any of them is not taken over silently.
RUN_FILES = (EVENTS_FILE, SUMMARY_JSON, SUMMARY_MD, STDOUT_LOG, STDERR_LOG, RECORDER_INFO, RECORDER_LOG)


def holds_a_run(d: Path) -> bool:
    return os.path.lexists(d / EVENTS_FILE) or os.path.lexists(d / SUMMARY_JSON)


def move_run_aside(d: Path, now: datetime) -> Path:
    """Move the run files of ``d`` into ``d/previous-<time>/`` (0700); returns that folder."""
    base = d / f"previous-{now:%Y%m%d-%H%M%S}"
    aside, n = base, 1
    while os.path.lexists(aside):
        n += 1
        aside = base.with_name(f"{base.name}-{n}")
    aside.mkdir(mode=0o700)
    for name in RUN_FILES:
        if os.path.lexists(d / name):
            os.rename(d / name, aside / name)  # a symlink moves as the link, never followed
    return aside
