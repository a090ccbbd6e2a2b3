"""Checkpoints of the reduced state beside the journal, so that a reader reduces only the tail.

The journal stays the truth: a checkpoint is a cache of ``RunState`` after the events up to a
journal position (segment, byte), written by the recorder every so many events or seconds.
``checkpoint.bin`` is the latest; ``checkpoint.NNNNNN.bin`` the first one written in segment N
(``replay --until`` starts from the latest one before its time).

File: a magic line, a JSON header line, then the payload (the state, pickled, zstd-compressed).
The header says the format, the fingerprint of the reducer code that wrote it (the sources of
``neurondesk/core``: a checkpoint of other reducers is never used, whichever is newer), the
journal position and the CRC of the journal bytes just before it (a checkpoint that does not
match its journal — rewritten, truncated, another recorder's — is never used), the payload's
length and BLAKE2b digest (a torn or corrupt file is never used). Loading unpickles through an
allowlist: classes of ``neurondesk.core`` and a few containers, nothing else is ever called.

Written as a temp file (O_EXCL, O_NOFOLLOW, 0600), fsynced, renamed over the old one: a reader
sees the old checkpoint or the new one, never half of one; a disk that fills mid-write leaves the
old one and a temp file that is removed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import zstandard

import neurondesk.core as core_pkg
from neurondesk.core.reduce.state import RunState
from neurondesk.store import journal_segments as seg
from neurondesk.store.input_files import open_regular
from neurondesk.store.rundir import RunPaths

MAGIC = b"NDCHECKPOINT\n"
FORMAT = 1
TAIL_BYTES = 256  # journal bytes before the position whose CRC the header keeps


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why in a few words."""


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


_ALLOWED_OTHER = {("collections", "deque"), ("collections", "Counter"), ("collections", "OrderedDict"),
                  ("collections", "defaultdict"), ("array", "array"), ("array", "_array_reconstructor"),
                  ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
                  ("builtins", "bytearray"), ("builtins", "slice")}


class _CoreUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED_OTHER:
            return super().find_class(module, name)
        if module == "neurondesk.core" or module.startswith("neurondesk.core."):
            obj = super().find_class(module, name)
            if isinstance(obj, type) and obj.__module__ == module:
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a run state")


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
    payload = zstandard.ZstdCompressor(level=1).compress(pickle.dumps(state, protocol=5))
    header = {"format": FORMAT, "reducers": reducer_fingerprint(), "run_id": state.run_id,
              "segment": position[0], "offset": position[1], "events": state.event_count,
              "first_t": state.started_t, "max_t": state.last_t,
              "journal_crc": _journal_tail_crc(events, position),
              "payload_bytes": len(payload), "payload_blake2b": hashlib.blake2b(payload, digest_size=16).hexdigest(),
              "listing": listing_of(state)}
    return MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload


def listing_of(state: RunState) -> dict:
    """What `ls` shows of a run, as of this checkpoint, in plain JSON: readable by any version."""
    return {"command": list(state.command), "steps_done": state.steps_done, "steps_requested": state.steps_requested,
            "phase": state.phase(state.last_t)[1], "started_t": state.started_t, "last_t": state.last_t,
            "price_per_hour": state.price_per_hour, "finished": state.finished}


def write_checkpoint(run_dir: Path, state: RunState, events: Path, position: tuple[int, int],
                     segment: int | None = None) -> int:
    """The latest checkpoint, or with ``segment`` the first one of that journal segment.
    Atomically (temp file, fsync, rename), 0600, never through a symlink. Returns its size;
    raises OSError (the old checkpoint stays, the temp file is removed)."""
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


def _header(f: io.BufferedReader, path: Path) -> dict:
    if f.read(len(MAGIC)) != MAGIC:
        raise CheckpointError("not a neurondesk checkpoint")
    line = f.readline(4096)
    if not line.endswith(b"\n"):
        raise CheckpointError("its header is cut")
    try:
        header = json.loads(line)
    except ValueError as e:
        raise CheckpointError(f"its header is not JSON ({e})") from e
    if not isinstance(header, dict):
        raise CheckpointError("its header is not an object")
    return header


def read_header(path: Path) -> dict:
    """The header of a checkpoint file (CheckpointError: not one, or of another format)."""
    try:
        fd = open_regular(path, "a checkpoint", follow=False)  # a FIFO in its place must not block
    except OSError as e:
        raise CheckpointError(e.strerror or str(e)) from e
    with os.fdopen(fd, "rb") as f:
        return _header(f, path)


def read_checkpoint(path: Path, events: Path) -> Checkpoint:
    """The checkpoint at ``path`` for the journal ``events``, checked end to end; CheckpointError
    with the reason otherwise."""
    try:
        fd = open_regular(path, "a checkpoint", follow=False)  # a FIFO in its place must not block
    except OSError as e:
        raise CheckpointError(e.strerror or str(e)) from e
    with os.fdopen(fd, "rb") as f:
        header = _header(f, path)
        if header.get("format") != FORMAT:
            raise CheckpointError(f"format {header.get('format')!r}, this neurondesk reads {FORMAT}")
        if header.get("reducers") != reducer_fingerprint():
            raise CheckpointError("written by another version of neurondesk's reducers")
        try:
            position = (int(header["segment"]), int(header["offset"]))
            size, digest = int(header["payload_bytes"]), str(header["payload_blake2b"])
            crc = int(header["journal_crc"])
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"its header lacks {e}") from e
        payload = f.read(size + 1)
    if len(payload) != size:
        raise CheckpointError(f"torn: {len(payload):,} of {size:,} bytes")
    if hashlib.blake2b(payload, digest_size=16).hexdigest() != digest:
        raise CheckpointError("corrupt: its digest does not match")
    if _journal_tail_crc(events, position) != crc:
        raise CheckpointError("it does not match the journal (rewritten or another run's)")
    try:
        state = _CoreUnpickler(io.BytesIO(zstandard.ZstdDecompressor().decompress(payload))).load()
    except Exception as e:  # noqa: BLE001 - whatever is wrong inside, the journal is read instead
        raise CheckpointError(f"cannot be loaded ({type(e).__name__}: {e})") from e
    if not isinstance(state, RunState):
        raise CheckpointError("holds no run state")
    return Checkpoint(state, position, int(header.get("events") or 0), header.get("first_t"),
                      header.get("max_t"), Path(path))


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
                if not isinstance(h.get("max_t"), int | float) or h["max_t"] > until_t:
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
