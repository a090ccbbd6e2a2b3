"""Where a run goes when its disk is full: a fallback folder on another filesystem.

When the journal cannot be written, the recorder keeps the unwritten events in memory (bounded);
when the run ends, or that memory runs out, it writes them to ``<fallback root>/<run id>/``, a
folder of that run alone, named by its unique id (store/run_ids.py: ``a/run`` and ``b/run`` never
share one); a folder there that holds another run's record is never continued:

- ``events.remainder.jsonl``: the journal's bytes that never reached the run folder, in order;
- ``fallback.json``: the run folder and how many journal bytes were on disk there when it moved;
- ``summary.json`` and ``summary.md``: a full copy of the run's summary.

The whole journal is the run folder's first ``journal_bytes_in_run_dir`` bytes followed by the
remainder (``open_whole_journal``), which is how ``neurondesk summary FALLBACK`` rebuilds the run.
Fallback roots, in order: ``$NEURONDESK_HOME/fallback`` when NEURONDESK_HOME is set (beside the
runs it holds), else the user data folder's ``fallback``; then the temporary folder; one on another
filesystem than the run folder is preferred (the full disk would refuse it too).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

import platformdirs

from neurondesk.store.input_files import open_regular_stream, read_regular
from neurondesk.store.rundir import HOME_ENV, RunPaths, private_dir_problem

FALLBACK_INFO = "fallback.json"
REMAINDER_FILE = "events.remainder.jsonl"


class FallbackError(OSError):
    """No fallback folder could be made, or one cannot be read; the message says which and why."""


@dataclass(frozen=True)
class FallbackInfo:
    run_id: str
    run_dir: str
    journal_bytes_in_run_dir: int  # the journal's first bytes, in the run folder; the rest is here


def fallback_roots() -> list[Path]:
    """The fixed roots, then the fresh ones made when those were refused (``<tmp>/neurondesk-
    fallback-<uid>-<random>``, oldest first): every one is used only if it is a private folder of
    this user (``_private``)."""
    tmp = Path(tempfile.gettempdir())
    fixed = tmp / f"neurondesk-fallback-{os.getuid()}"
    prefix = f"{fixed.name}-"
    try:  # a plain scan: a viewer calls this every 5 s while no events come, in a /tmp of any size
        with os.scandir(tmp) as entries:
            fresh = sorted((Path(e.path) for e in entries if e.name.startswith(prefix)), key=_mtime)
    except OSError:
        fresh = []
    home = os.environ.get(HOME_ENV, "").strip()
    data = Path(home).expanduser() if home else Path(platformdirs.user_data_dir("neurondesk"))
    return [data / "fallback", fixed, *fresh]


def _mtime(p: Path) -> float:
    try:
        return os.lstat(p).st_mtime
    except OSError:
        return 0.0


def _private(folder: Path) -> str | None:
    """Why ``folder`` is no folder of this user's alone (a symlink, another user's, any access for
    group or others); None when it is one."""
    try:
        st = os.lstat(folder)
    except OSError as e:
        return f"{folder}: {e.strerror or e}"
    why = private_dir_problem(st, folder, "the fallback folder")
    if why is None and st.st_mode & 0o077:
        why = f"the fallback folder {folder} is open to group or others (mode {st.st_mode & 0o7777:04o})"
    return why


def make_fallback_dir(run_dir: Path, roots: list[Path] | None = None, run_id: str | None = None) -> Path:
    """A new private folder for the remainder of run ``run_id`` (default: the folder's name), named
    by it: under the first root on another
    filesystem than the run folder, else under the first root that can be made at all. A root or
    folder that is not this user's alone (made first by another user, a symlink, open to others)
    is refused; when every root is, a fresh unpredictable one is made in the temporary folder
    (its name is in the notice that says where the journal went). A folder of that name that holds
    anything but this run's own record (another run's, unreadable, stray files) is never used."""
    roots = fallback_roots() if roots is None else roots
    run_id = run_dir.name if run_id is None else run_id
    here = _device_of(run_dir)
    ordered = [r for r in roots if _device_of(r) != here] + [r for r in roots if _device_of(r) == here]
    reasons = []
    for root in ordered:
        target = root / run_id
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            why = _private(root)
            if why is not None:
                reasons.append(why)
                continue
            target.mkdir(mode=0o700)
            return target
        except FileExistsError:
            why = _private(target)
            if why is not None:
                reasons.append(why)
            else:
                theirs = _other_run(target, run_id, run_dir)
                if theirs is None:
                    return target  # ours from earlier in this run (or empty)
                reasons.append(theirs)
        except OSError as e:
            reasons.append(f"{target}: {e.strerror or e}")
    try:  # mkdtemp: O_EXCL-like, 0700, a name nobody can guess ahead
        fresh = Path(tempfile.mkdtemp(prefix=f"neurondesk-fallback-{os.getuid()}-"))
        target = fresh / run_id
        target.mkdir(mode=0o700)
        return target
    except OSError as e:
        reasons.append(f"a fresh folder in {tempfile.gettempdir()}: {e.strerror or e}")
    raise FallbackError("no fallback folder for the run's remaining events: " + "; ".join(reasons))


def _other_run(target: Path, run_id: str, run_dir: Path) -> str | None:
    """Why the existing folder ``target`` is not this run's fallback; None when it is (its record
    names this run and its folder) or when it is empty."""
    if not (target / FALLBACK_INFO).exists():
        return None if not any(target.iterdir()) else f"{target}: exists and holds something else"
    try:
        info = read_fallback_info(target)
    except FallbackError as e:
        return str(e)
    if info.run_id == run_id and Path(info.run_dir) == Path(run_dir):
        return None
    return (f"{target} holds the fallback of another run ({info.run_id}, {info.run_dir}): "
            "never continued with this one's")


def _device_of(path: Path) -> int | None:
    """The filesystem of ``path``, or of its nearest existing parent."""
    for p in [path, *path.parents]:
        try:
            return os.stat(p).st_dev
        except OSError:
            continue
    return None


def write_fallback_info(folder: Path, info: FallbackInfo) -> None:
    from neurondesk.store.summary_files import write_atomic

    write_atomic(folder / FALLBACK_INFO, json.dumps(asdict(info), indent=2) + "\n")


def read_fallback_info(folder: Path) -> FallbackInfo:
    path = Path(folder) / FALLBACK_INFO
    try:
        d = json.loads(read_regular(path, "a fallback record", 1 << 20, follow=False))
        return FallbackInfo(run_id=str(d["run_id"]), run_dir=str(d["run_dir"]),
                            journal_bytes_in_run_dir=int(d["journal_bytes_in_run_dir"]))
    except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError) as e:  # fuzz.py found the last two
        raise FallbackError(f"{path} is not a readable neurondesk fallback record: {e}") from e


def is_fallback_dir(folder: Path) -> bool:
    return (Path(folder) / FALLBACK_INFO).is_file()


def find_fallback(run_dir: Path, run_id: str | None = None) -> Path | None:
    """The fallback folder made for the run recorded in ``run_dir``, if its disk filled during the
    run. ``run_id``: that run's id (default: read from the journal's first event; None found there:
    no fallback is looked for, none of another run in that folder is taken for it)."""
    run_id = run_id or journal_run_id(run_dir)
    if not run_id or "/" in run_id or run_id in (".", ".."):
        return None
    for root in fallback_roots():
        folder = root / run_id
        if _private(root) is None and _private(folder) is None and is_fallback_dir(folder):
            try:
                info = read_fallback_info(folder)
                if info.run_id == run_id and Path(info.run_dir) == Path(run_dir):
                    return folder
            except FallbackError:
                continue
    return None


def journal_run_id(run_dir: Path) -> str | None:
    """The run id of the journal's first event (its run_started), None when there is none to read."""
    from neurondesk.core.events.run_events import RunStarted
    from neurondesk.store.journal import JournalError, iter_journal

    try:
        events = iter_journal(RunPaths(run_dir).events, [])
        first = next(events, None)
        events.close()
    except (JournalError, OSError):
        return None
    return first.run_id if isinstance(first, RunStarted) else None


def open_whole_journal(folder: Path) -> tuple[BinaryIO, str | None]:
    """The run's whole journal as one binary stream (the run folder's part, then the remainder),
    and a warning when the run folder's part is missing or shorter than recorded."""
    info = read_fallback_info(folder)
    warning = None
    head: BinaryIO | None = None
    head_path = RunPaths(info.run_dir).events
    try:
        head = open_regular_stream(head_path, "a journal", follow=False)  # closed with the chain
        if os.fstat(head.fileno()).st_size < info.journal_bytes_in_run_dir:
            warning = (f"{head_path} is shorter than when the disk filled up; the summary is rebuilt "
                       "from what is left, the copy saved at the end is summary.json beside the remainder")
    except OSError as e:
        warning = (f"the first part of the journal, {head_path}, cannot be read ({e.strerror or e}): only the "
                   "events written after the disk filled up are replayed; the copy saved at the end is summary.json")
    try:
        tail = open_regular_stream(Path(folder) / REMAINDER_FILE, "a journal", follow=False)  # closed with the chain
    except OSError as e:
        if head is not None:
            head.close()
        raise FallbackError(f"cannot read {Path(folder) / REMAINDER_FILE}: {e.strerror or e}") from e
    parts = ([(head, info.journal_bytes_in_run_dir)] if head is not None else []) + [(tail, None)]
    return io.BufferedReader(_Chain(_closed_segments(head_path) + parts)), warning


def _closed_segments(events: Path) -> list[tuple[BinaryIO, int | None]]:
    """The journal's segments closed before the disk filled up (store/journal_segments.py), in order."""
    import zstandard

    from neurondesk.store.journal_segments import ZST, closed_segments

    out: list[tuple[BinaryIO, int | None]] = []
    for _, path in sorted(closed_segments(events).items()):
        try:
            f = open_regular_stream(path, "a journal segment", follow=False)  # closed with the chain
        except OSError:
            continue  # said by nobody here: the figures lack it, as with a deleted segment
        stream = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True, closefd=True) \
            if path.name.endswith(ZST) else f
        out.append((stream, None))
    return out


class _Chain(io.RawIOBase):
    """Files read one after another, each up to its limit (None: to its end)."""

    def __init__(self, parts: list[tuple[BinaryIO, int | None]]) -> None:
        self.parts = parts
        self.left = [limit for _, limit in parts]
        self.i = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self.i < len(self.parts):
            f, left = self.parts[self.i][0], self.left[self.i]
            want = len(b) if left is None else min(len(b), left)
            data = f.read(want) if want else b""
            if data:
                b[:len(data)] = data
                if left is not None:
                    self.left[self.i] = left - len(data)
                return len(data)
            self.i += 1
        return 0

    def close(self) -> None:
        for f, _ in self.parts:
            f.close()
        super().close()
