"""Checkpoints of the reduced state beside the journal, so that a reader reduces only the tail.

The journal stays the truth: a checkpoint is a cache of ``RunState`` after the events up to a
journal position (segment, byte), written by the recorder every so many events or seconds.
``checkpoint.bin`` is the latest; ``checkpoint.NNNNNN.bin`` the first one written in segment N
(``replay --until`` starts from the latest one before its time).

File: a magic line, a JSON header line (store/checkpoint_header.py), then the payload: the state as
store/state_codec.py's table (msgpack, this project's own encoding, no pickle), zstd-compressed.
The header says the format, the fingerprint of the reducer code that wrote it (the sources of
``neurondesk/core``: a checkpoint of other reducers is never used, whichever is newer), the
journal position and the CRC of the journal bytes just before it (a checkpoint that does not
match its journal — rewritten, truncated, another recorder's — is never used), the payload's
length, the state's length and the payload's BLAKE2b digest (a torn or corrupt file is never used).

Read like untrusted input: only a private regular file of this user (not another user's, not
writable or readable by others, no link); the header's every number in its range; the payload
read up to its bound; the zstd frame's declared size checked against the header and the bound
before decompressing, and read through a bounded stream; the state decoded through a fixed schema
that cannot nest. Anything else is a CheckpointError: one line, and the reader falls back to the
journal (sources/rebuild.py), and ``replace_unusable`` below replaces a bad one once.

Written as a temp file (O_EXCL, O_NOFOLLOW, 0600), fsynced, renamed over the old one: a reader
sees the old checkpoint or the new one, never half of one; a disk that fills mid-write leaves the
old one and a temp file that is removed.
"""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import zstandard

import neurondesk.core as core_pkg
from neurondesk.core.reduce.state import RunState
from neurondesk.store import journal_segments as seg
from neurondesk.store.checkpoint_header import (
    FORMAT,
    MAGIC,
    MAX_COUNT,
    MAX_PAYLOAD,
    MAX_STATE,
    CheckpointError,
    Header,
    Listing,
    encode_header,
    header_line,
    parse_header,
    parse_listing,
)
from neurondesk.store.input_files import open_regular
from neurondesk.store.liveness import recorder_alive
from neurondesk.store.own_files import private_file_problem
from neurondesk.store.rundir import RunPaths, private_dir_problem
from neurondesk.store.state_codec import SCHEMA, StateCodecError, decode_state, encode_state

__all__ = ["FORMAT", "MAGIC", "Checkpoint", "CheckpointError", "best_checkpoint", "checkpoint_files",
           "fallback_words", "read_checkpoint", "read_header", "read_listing", "replace_unusable", "write_checkpoint"]

TAIL_BYTES = 256  # journal bytes before the position whose CRC the header keeps
COMMAND_KEEP = 8 << 10  # characters of the command line the listing keeps (the header stays under its bound)


@dataclass(frozen=True)
class Checkpoint:
    state: RunState
    position: tuple[int, int]  # (segment, byte offset in it) of the journal after its last event
    events: int
    first_t: float | None
    max_t: float | None
    path: Path


@cache
def reducer_fingerprint() -> str:
    """Of every source file of neurondesk/core: the events, the codec and the reducers."""
    h = hashlib.sha256()
    root = Path(core_pkg.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def _journal_tail_crc(events: Path, position: tuple[int, int]) -> int:
    n, offset = position
    stream, _ = seg.open_segment(events, n)
    if stream is None:
        raise CheckpointError(f"journal segment {n} it points into is not there")
    try:
        start = max(0, offset - TAIL_BYTES)
        if stream.path.name.endswith(seg.ZST):
            stream.skip(start)
            data = stream.read(offset - start)
        else:
            data = os.pread(stream.fd, offset - start, start)
    except EOFError as e:
        raise CheckpointError(f"the journal is shorter than it says ({e})") from e
    finally:
        stream.close()
    if len(data) != offset - start:
        raise CheckpointError("the journal is shorter than it says")
    return zlib.crc32(data)


def encode_checkpoint(state: RunState, events: Path, position: tuple[int, int]) -> bytes:
    """The file's bytes (ValueError: a state that cannot be encoded, or larger than a reader reads)."""
    table = encode_state(state)
    payload = zstandard.ZstdCompressor(level=1, write_content_size=True).compress(table)
    if len(table) > MAX_STATE or len(payload) > MAX_PAYLOAD:
        raise CheckpointError(f"a state of {len(table):,} bytes, over what a reader reads")
    header = Header(format=FORMAT, schema=SCHEMA, reducers=reducer_fingerprint(), run_id=state.run_id,
                    segment=position[0], offset=position[1], events=state.event_count,
                    first_t=_time(state.started_t), max_t=_time(state.last_t), journal_crc=_journal_tail_crc(events, position),
                    payload_bytes=len(payload), state_bytes=len(table),
                    payload_blake2b=hashlib.blake2b(payload, digest_size=16).hexdigest(), listing=listing_of(state))
    return MAGIC + encode_header(header) + b"\n" + payload


def listing_of(state: RunState) -> Listing:
    """What `ls` shows of a run, as of this checkpoint, in plain JSON: readable by any version."""
    command = [arg[:COMMAND_KEEP] for arg in state.command]
    while sum(len(a) for a in command) > COMMAND_KEEP:
        command.pop()
    price = state.price_per_hour
    requested = state.steps_requested
    return Listing(command=command, steps_done=max(0, state.steps_done),
                   steps_requested=requested if requested is not None and 0 <= requested <= MAX_COUNT else None,
                   phase=state.phase(state.last_t)[1], started_t=_time(state.started_t), last_t=_time(state.last_t),
                   price_per_hour=price if price is not None and 0 <= price <= 1e6 else None,
                   finished=bool(state.finished))


def _time(t: float | None) -> float | None:
    """A time as the header keeps it: in the range a reader accepts, else None (never a header no one reads)."""
    return t if isinstance(t, int | float) and 0 <= t <= 1e11 else None


def write_checkpoint(run_dir: Path, state: RunState, events: Path, position: tuple[int, int],
                     segment: int | None = None) -> int:
    """The latest checkpoint, or with ``segment`` the first one of that journal segment.
    Atomically (temp file, fsync, rename), 0600, never through a symlink. Returns its size;
    raises OSError (the old checkpoint stays, the temp file is removed) or ValueError (a state
    that cannot be encoded)."""
    data = encode_checkpoint(state, events, position)
    paths = RunPaths(run_dir)
    final = paths.checkpoint if segment is None else paths.segment_checkpoint(segment)
    tmp = final.with_name(f"{final.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, final)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(data)


def _open(path: Path) -> int:
    """A descriptor on a checkpoint this user wrote: a private regular file of theirs, else CheckpointError."""
    try:
        fd = open_regular(path, "a checkpoint", follow=False)  # a FIFO in its place must not block
    except OSError as e:
        raise CheckpointError(e.strerror or str(e)) from e
    problem = private_file_problem(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise CheckpointError(f"not believed: {problem} (a checkpoint is a private file of the run's owner)")
    return fd


def read_header(path: Path) -> Header:
    """The header of a checkpoint file, checked (CheckpointError: not one, of another format, not believed)."""
    with os.fdopen(_open(path), "rb") as f:
        return parse_header(header_line(f))


def read_listing(path: Path) -> Listing | None:
    """The `ls` row a checkpoint of any format keeps (None: not there, not believed, or none)."""
    try:
        with os.fdopen(_open(path), "rb") as f:
            return parse_listing(header_line(f))
    except CheckpointError:
        return None


def _decompress(payload: bytes, size: int) -> bytes:
    """The state bytes: the frame's declared size must be the header's (both bounded) before a byte
    is decompressed, and at most that many are read."""
    try:
        declared = zstandard.get_frame_parameters(payload).content_size
    except zstandard.ZstdError as e:
        raise CheckpointError(f"its payload is not a zstd frame ({e})") from e
    if declared != size:
        raise CheckpointError(f"its payload declares {declared:,} bytes, its header {size:,}")
    reader = zstandard.ZstdDecompressor(max_window_size=MAX_STATE).stream_reader(payload, read_across_frames=False)
    try:
        with reader:
            data = reader.read(size + 1)
    except zstandard.ZstdError as e:
        raise CheckpointError(f"its payload does not decompress ({e})") from e
    if len(data) != size:
        raise CheckpointError(f"its payload holds {len(data):,} bytes, not {size:,}")
    return data


def read_checkpoint(path: Path, events: Path) -> Checkpoint:
    """The checkpoint at ``path`` for the journal ``events``, checked end to end; CheckpointError
    with the reason otherwise."""
    with os.fdopen(_open(path), "rb") as f:
        header = parse_header(header_line(f))
        if header.schema != SCHEMA:
            raise CheckpointError(f"state schema {header.schema}, this neurondesk reads {SCHEMA}")
        if header.reducers != reducer_fingerprint():
            raise CheckpointError("written by another version of neurondesk's reducers")
        payload = f.read(header.payload_bytes + 1)
    if len(payload) != header.payload_bytes:
        raise CheckpointError(f"torn: {len(payload):,} of {header.payload_bytes:,} bytes"
                              if len(payload) < header.payload_bytes else "longer than its header says")
    if hashlib.blake2b(payload, digest_size=16).hexdigest() != header.payload_blake2b:
        raise CheckpointError("corrupt: its digest does not match")
    position = (header.segment, header.offset)
    if _journal_tail_crc(events, position) != header.journal_crc:
        raise CheckpointError("it does not match the journal (rewritten or another run's)")
    try:
        state = decode_state(_decompress(payload, header.state_bytes))
    except StateCodecError as e:
        raise CheckpointError(f"cannot be loaded ({e})") from e
    if state.event_count != header.events or state.run_id != header.run_id:
        raise CheckpointError("its state is not the one its header describes")
    return Checkpoint(state, position, header.events, header.first_t, header.max_t, Path(path))


def checkpoint_files(run_dir: Path) -> list[Path]:
    """The latest checkpoint first, then the per-segment ones, newest first."""
    paths = RunPaths(run_dir)
    by_segment = paths.segment_checkpoints()
    return [paths.checkpoint] + [by_segment[n] for n in sorted(by_segment, reverse=True)]


def best_checkpoint(run_dir: Path, events: Path, until_t: float | None = None,
                    why_not: list[str] | None = None) -> Checkpoint | None:
    """The newest usable checkpoint (with ``until_t``: the newest whose events all come at or
    before it). Each one that exists and cannot be used adds its reason to ``why_not``."""
    for path in checkpoint_files(run_dir):
        if not os.path.lexists(path):
            continue
        if until_t is not None:
            try:
                h = read_header(path)
                if h.max_t is None or h.max_t > until_t:
                    continue
            except CheckpointError:
                pass  # read_checkpoint says why
        try:
            return read_checkpoint(path, events)
        except CheckpointError as e:
            if why_not is not None:
                why_not.append(f"{path.name}: {e}")
    return None


def fallback_words(why_not: list[str]) -> str | None:
    """The one line a reader says when it reduced the whole journal although a checkpoint was there."""
    if not why_not:
        return None
    more = f" (and {len(why_not) - 1} more)" if len(why_not) > 1 else ""
    return f"checkpoint not used, {why_not[0]}{more}: the whole journal was reduced instead"

# ---------------------------------------------------------------- rebuilt once
# A checkpoint that cannot be used (corrupt, torn, of another format or version, a pickle of an older
# neurondesk, not believed) is rebuilt once and replaced: the reader that reduced the whole journal
# writes the state it got as the run's checkpoint, removes per-segment checkpoints no one can read, and
# notes it once in the run's recorder.log. The next reader loads the new checkpoint and says nothing.
#
# Only where that is safe and useful: the recorder is gone (a live one writes its own within seconds),
# the run folder is a private folder of this user (another user's folder is read, never written), and
# the journal ends on a whole line (its end is the new checkpoint's position).


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
