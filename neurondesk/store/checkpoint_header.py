"""A checkpoint's header line (store/checkpoint.py), read like untrusted input: one typed msgspec
struct whose every number has a range, so a size of ``Infinity``, ``1e300`` or ``2e11``, a negative
offset or a string where a number goes is one CheckpointError (a few words), never an
OverflowError, a MemoryError or a TypeError in a reader.

The header also keeps the row `ls` shows of the run (``Listing``): plain JSON any version can read.
"""

from __future__ import annotations

from typing import Annotated, BinaryIO

import msgspec

MAGIC = b"NDCHECKPOINT\n"
FORMAT = 2  # 2: the state as store/state_codec.py's table (1 was a pickle: never read again)
HEADER_MAX = 64 << 10  # bytes of the header line; the command line in the listing is cut to fit
MAX_PAYLOAD = 64 << 20  # bytes of compressed state a checkpoint may hold (a million-step run's: well under 1 MiB)
MAX_STATE = 256 << 20  # bytes of state its payload may decompress to: checked before decompressing
MAX_COUNT = 2**53  # events, bytes, segments: any real run's, and exact in a float

Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
Time = Annotated[float, msgspec.Meta(ge=0, le=1e11)]  # epoch seconds, to the year 5138
Hex128 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")]


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message says why in a few words."""


class Listing(msgspec.Struct, frozen=True):
    """What `ls` shows of a run, as of a checkpoint."""

    command: list[str] = []
    steps_done: Count = 0
    steps_requested: Count | None = None
    phase: str = ""
    started_t: Time | None = None
    last_t: Time | None = None
    price_per_hour: Annotated[float, msgspec.Meta(ge=0, le=1e6)] | None = None
    finished: bool = False


class Header(msgspec.Struct, frozen=True):
    format: int
    schema: int  # store/state_codec.py's SCHEMA
    reducers: str  # the fingerprint of neurondesk/core's sources that wrote it
    run_id: str | None
    segment: Count
    offset: Count
    events: Count
    first_t: Time | None
    max_t: Time | None
    journal_crc: Annotated[int, msgspec.Meta(ge=0, lt=2**32)]
    payload_bytes: Annotated[int, msgspec.Meta(ge=0, le=MAX_PAYLOAD)]
    state_bytes: Annotated[int, msgspec.Meta(ge=0, le=MAX_STATE)]
    payload_blake2b: Hex128
    listing: Listing


class _Format(msgspec.Struct):
    format: int | float | str | None = None


class _ListingOnly(msgspec.Struct):
    listing: Listing


def encode_header(header: Header) -> bytes:
    return msgspec.json.encode(header)


def header_line(f: BinaryIO) -> bytes:
    """The header line after the magic (CheckpointError: not a checkpoint, or its header is cut)."""
    if f.read(len(MAGIC)) != MAGIC:
        raise CheckpointError("not a neurondesk checkpoint")
    line = f.readline(HEADER_MAX + 1)
    if not line.endswith(b"\n"):
        raise CheckpointError("its header is cut" if len(line) <= HEADER_MAX else "its header is too long")
    return line


def parse_header(line: bytes) -> Header:
    """The header, every field checked (CheckpointError, one line, otherwise)."""
    try:
        found = msgspec.json.decode(line, type=_Format).format
    except msgspec.DecodeError as e:
        raise CheckpointError(f"its header is not a JSON object ({e})") from e
    if found == 1:
        raise CheckpointError("written by an older neurondesk (a pickled state, never read again)")
    if found != FORMAT:
        raise CheckpointError(f"format {str(found)[:20]}, this neurondesk reads {FORMAT}")
    try:
        return msgspec.json.decode(line, type=Header)
    except msgspec.DecodeError as e:  # ValidationError too: a number out of its range, a wrong type
        raise CheckpointError(f"its header is not valid ({e})") from e


def parse_listing(line: bytes) -> Listing | None:
    """The `ls` row of a header of any format (None: it has none, or not a valid one)."""
    try:
        return msgspec.json.decode(line, type=_ListingOnly).listing
    except msgspec.DecodeError:
        return None
