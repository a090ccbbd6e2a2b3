"""A checkpoint that cannot be used (corrupt, torn, of another format or version, a pickle of an older
neurondesk, not believed) is rebuilt once and replaced: the reader that reduced the whole journal
writes the state it got as the run's checkpoint, removes per-segment checkpoints no one can read, and
notes it once in the run's recorder.log. The next reader loads the new checkpoint and says nothing.

Only where that is safe and useful: the recorder is gone (a live one writes its own within seconds),
the run folder is a private folder of this user (another user's folder is read, never written), and
the journal ends on a whole line (its end is the new checkpoint's position).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from neurondesk.core.reduce.state import RunState
from neurondesk.store import journal_segments as seg
from neurondesk.store.checkpoint import read_header, reducer_fingerprint, write_checkpoint
from neurondesk.store.checkpoint_header import CheckpointError
from neurondesk.store.liveness import recorder_alive
from neurondesk.store.own_files import private_file_problem
from neurondesk.store.rundir import RunPaths, private_dir_problem
from neurondesk.store.state_codec import SCHEMA


def replace_unusable(run_dir: Path, state: RunState, events: Path, why_not: list[str]) -> str | None:
    """After ``state`` was reduced from the whole journal ``events`` because of ``why_not``: the
    one line to say (the checkpoint was rebuilt and replaced), or None when it was not (then the
    caller says why_not as before)."""
    run_dir = Path(run_dir)
    if not why_not or state.event_count == 0 or recorder_alive(run_dir):
        return None
    try:
        if private_dir_problem(os.stat(run_dir), run_dir) is not None:
            return None
        position = _journal_end(events)
        if position is None:
            return None
        write_checkpoint(run_dir, state, events, position)
    except (OSError, ValueError):
        return None  # said as before: the whole journal was reduced
    removed = _remove_unreadable_segment_checkpoints(run_dir)
    words = (f"checkpoint not used, {why_not[0]}: the whole journal was reduced, and the checkpoint rebuilt "
             "from it and replaced" + (f" ({removed} unreadable per-segment one(s) removed)" if removed else ""))
    _note(run_dir, words)
    return f"{words} (said once: noted in {RunPaths(run_dir).recorder_log.name})"


def _journal_end(events: Path) -> tuple[int, int] | None:
    """(segment, size) of the live journal file when it ends with a newline, else None."""
    fd = seg.open_nofollow(events)
    try:
        segment = seg.segment_of_file(fd)
        size = os.fstat(fd).st_size
        if segment is None or size == 0 or os.pread(fd, 1, size - 1) != b"\n":
            return None
        return segment, size
    finally:
        os.close(fd)


def _remove_unreadable_segment_checkpoints(run_dir: Path) -> int:
    """Per-segment checkpoints (replay --until's) whose header this version cannot use: a replay
    would only say so again. Those of this version stay."""
    removed = 0
    for path in RunPaths(run_dir).segment_checkpoints().values():
        try:
            header = read_header(path)
            if header.reducers == reducer_fingerprint() and header.schema == SCHEMA:
                continue
        except CheckpointError:
            pass
        try:
            if os.lstat(path).st_uid == os.geteuid():
                path.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def _note(run_dir: Path, words: str) -> None:
    """One line in the run's recorder.log (neurondesk's own log of the run); never through a link,
    only into a private file of this user. A failure is let go: the line was said on screen."""
    path = RunPaths(run_dir).recorder_log
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        if private_file_problem(os.fstat(fd)) is None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            os.write(fd, f"{stamp} neurondesk: {words}\n".encode())
    except OSError:
        pass
    finally:
        os.close(fd)
