"""Where runs live: ``<root>/<run id>/`` with a fixed set of file names, and the index beside them.

The root is ``$NEURONDESK_HOME/runs`` when that is set, else ``user_data_dir("neurondesk")/runs``.
Run ids sort by time: ``YYYYmmdd-HHMMSS-<4 hex>``, from a datetime the caller passes in.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
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
REPLAY_SUMMARY_JSON, REPLAY_SUMMARY_MD = "replay-summary.json", "replay-summary.md"
CHECKPOINT_FILE = "checkpoint.bin"  # the reduced state as of a recent flush (store/checkpoint.py)
# Files a run adds as it goes: the journal's closed segments (store/journal_segments.py), the first
# checkpoint of each segment, and their temp files while they are written
_JOURNAL_SEGMENT = re.compile(r"events\.\d{6}\.jsonl(\.zst)?(\.tmp\d+)?")
_SEGMENT_CHECKPOINT = re.compile(r"checkpoint\.(\d+)\.bin")
_CHECKPOINT = re.compile(r"checkpoint(\.\d+)?\.bin(\.tmp\d+)?")
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
    """The one handle on a run folder: every file a run keeps there is named here and nowhere else
    (a fallback folder holds the same names for what it keeps: its summary)."""

    dir: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "dir", Path(self.dir))  # a str from a command line or a JSON row

    @property
    def events(self) -> Path:
        """The journal's live segment (the closed ones beside it: store/journal_segments.py)."""
        return self.dir / EVENTS_FILE

    @property
    def summary_json(self) -> Path:
        return self.dir / SUMMARY_JSON

    @property
    def summary_md(self) -> Path:
        return self.dir / SUMMARY_MD

    @property
    def replay_summary_json(self) -> Path:
        """A replay's export (the console's `e` on a replay): never the recorder's own summary."""
        return self.dir / REPLAY_SUMMARY_JSON

    @property
    def replay_summary_md(self) -> Path:
        return self.dir / REPLAY_SUMMARY_MD

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

    @property
    def checkpoint(self) -> Path:
        return self.dir / CHECKPOINT_FILE

    def segment_checkpoint(self, segment: int) -> Path:
        """The first checkpoint written in journal segment ``segment`` (kept for replay --until)."""
        return self.dir / f"checkpoint.{segment:06d}.bin"

    def segment_checkpoints(self) -> dict[int, Path]:
        """The per-segment checkpoints there, by segment (none when the folder cannot be read)."""
        return {int(m.group(1)): self.dir / m.group(0) for m in map(_SEGMENT_CHECKPOINT.fullmatch, _names(self.dir))
                if m is not None}

    def journal_segments(self) -> list[Path]:
        """The journal's closed segments there (their reading: store/journal_segments.py)."""
        return [self.dir / name for name in _names(self.dir) if _JOURNAL_SEGMENT.fullmatch(name)]

    def grown_files(self) -> list[Path]:
        """The files a run adds as it goes: the journal's closed segments, the checkpoints."""
        return [self.dir / name for name in _names(self.dir)
                if _JOURNAL_SEGMENT.fullmatch(name) or _CHECKPOINT.fullmatch(name)]

    def stacks_file(self, now: datetime) -> Path:
        """The Python stacks of every rank as saved at ``now`` (sources/stacks.py, the console's `k`)."""
        return self.dir / f"stacks-{now:%Y%m%d-%H%M%S}.txt"

    @property
    def neuron_metrics(self) -> Path:
        """The folder TorchNeuron writes its metric tables into (collectors/devices/graph_stats.py)."""
        return self.dir / NEURON_METRICS_DIR

    @property
    def neuron_profile(self) -> Path:
        """The folder a Neuron Explorer capture goes into (collectors/neuron_profile.py)."""
        return self.dir / NEURON_PROFILE_DIR


def _names(d: Path) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


def index_path(run_root: Path) -> Path:
    """The run index of the runs under ``run_root`` (store/index.py)."""
    return Path(run_root) / INDEX_FILE


class RunDirRefused(ValueError):
    """A run folder that another user could read or rewrite; the message is one line saying why."""


def _owner(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return f"uid {uid}"


def private_dir_problem(st: os.stat_result, path: Path | str, what: str = "--run-dir") -> str | None:
    """Why a folder (``st``: its lstat) is no private folder of this user: a symlink, not a folder,
    another user's, or writable by group or others. None when it is one."""
    if stat.S_ISLNK(st.st_mode):
        return f"{what} {path} is a symbolic link: neurondesk never follows one it did not make; give the real folder"
    if not stat.S_ISDIR(st.st_mode):
        return (f"{what} {path} is a file, not a folder: give a folder (made if it does not exist), "
                "or leave --run-dir out for a new one under the data folder")
    if st.st_uid != os.geteuid():
        return (f"{what} {path} belongs to {_owner(st.st_uid)}, not to you: another user could read or rewrite "
                "the run there; give a folder of your own")
    if st.st_mode & 0o022:
        return (f"{what} {path} is writable by {'group and others' if st.st_mode & 0o022 == 0o022 else 'group' if st.st_mode & 0o020 else 'others'} "
                f"(mode {stat.S_IMODE(st.st_mode):04o}): another user could plant files in it; "
                f"`chmod go-w {path}`, or give another folder")
    return None


def _planted_problem(d: Path, names) -> str | None:
    """A file the run would write that is already in ``d`` and is not a private file of this user
    (another user's, readable or writable by others, a link, a FIFO ...)."""
    for name in names:
        try:
            st = os.lstat(d / name)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077 or st.st_nlink > 1:
            kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file" if not stat.S_ISREG(
                st.st_mode) else f"{_owner(st.st_uid)}'s" if st.st_uid != os.geteuid() else (
                f"mode {stat.S_IMODE(st.st_mode):04o}" if st.st_mode & 0o077 else "a hard link")
            return (f"--run-dir {d} already holds {name} ({kind}): it was not made by a run of yours and is not "
                    "reused; remove it, or give another folder")
    return None


def planted_file_problem(d: Path) -> str | None:
    """A run file already in ``d`` that is not a private file of this user (RunDirRefused's words)."""
    return _planted_problem(d, MOVABLE_FILES)


def make_private_run_dir(d: Path) -> None:
    """``d`` made (with the folders above it that are missing, each 0700 and never through a
    symlink), or checked when it exists: a folder of this user's, not writable by group or others,
    not a symlink, whose lock file (never moved aside) is a private file of this user. The other
    run files are the caller's to refuse or move aside (planted_file_problem, move_run_aside).
    Raises RunDirRefused (one line) or OSError."""
    missing = []
    p = Path(os.path.abspath(d))
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for m in reversed(missing):  # mkdir never follows a symlink planted at its own path: EEXIST
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            pass  # made meanwhile: checked below like any folder that was there
    fd = None
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        pass  # a symlink or a file: lstat says which
    try:
        st = os.fstat(fd) if fd is not None else os.lstat(d)
        why = private_dir_problem(st, d)
    finally:
        if fd is not None:
            os.close(fd)
    if why is None:
        why = _planted_problem(d, (RECORDER_LOCK,))
    if why is not None:
        raise RunDirRefused(why)


def create_run_dir(root: Path, run_id: str) -> RunPaths:
    """Make ``root/run_id`` (and root). Raises FileExistsError if that run exists already,
    ValueError for an id that is not a single plain path component."""
    if not run_id or run_id in (".", "..") or "/" in run_id or os.sep in run_id:
        raise ValueError(f"invalid run id {run_id!r}: expected a plain name like 20260101-120000-ab12")
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    why = private_dir_problem(os.lstat(root), root, "the run root")
    if why is not None:
        raise RunDirRefused(why + " (or set NEURONDESK_HOME)")
    d = root / run_id
    d.mkdir(mode=0o700)  # a run's command line, output and costs are its owner's alone
    return RunPaths(d)


# The files that say a folder holds a run; a --run-dir with any of them is not taken over silently.
RUN_FILES = (EVENTS_FILE, SUMMARY_JSON, SUMMARY_MD, STDOUT_LOG, STDERR_LOG, RECORDER_INFO, RECORDER_LOG)
# The folders the workload is told to write into (TorchNeuron's metric tables, a Neuron Explorer capture)
NEURON_METRICS_DIR, NEURON_PROFILE_DIR = "neuron-metrics", "neuron-profile"
TORCHNEURON_LOG = "torchneuron.log"  # TorchNeuron's log file (collectors/torchneuron.py)
# ... and every name a run writes there first (--force moves them aside too; never reused)
MOVABLE_FILES = (*RUN_FILES, *(f"{n}.tmp" for n in (SUMMARY_JSON, SUMMARY_MD, RECORDER_INFO)),
                 NEURON_METRICS_DIR, NEURON_PROFILE_DIR, TORCHNEURON_LOG)


def holds_run_files(d: Path) -> bool:
    return any(os.path.lexists(d / name) for name in MOVABLE_FILES) or bool(RunPaths(d).grown_files())


def holds_a_run(d: Path) -> bool:
    """A journal (its live file or a closed segment: a new one there would go on from it) or a summary."""
    paths = RunPaths(d)
    return os.path.lexists(paths.events) or os.path.lexists(paths.summary_json) or bool(paths.journal_segments())


def move_run_aside(d: Path, now: datetime) -> Path:
    """Move the run files of ``d`` (the journal's closed segments and the checkpoints too) into
    ``d/previous-<time>/`` (0700); returns that folder."""
    base = d / f"previous-{now:%Y%m%d-%H%M%S}"
    aside, n = base, 1
    while os.path.lexists(aside):
        n += 1
        aside = base.with_name(f"{base.name}-{n}")
    aside.mkdir(mode=0o700)
    for name in (*MOVABLE_FILES, *(p.name for p in RunPaths(d).grown_files())):
        if os.path.lexists(d / name):
            os.rename(d / name, aside / name)  # a symlink moves as the link, never followed
    return aside
