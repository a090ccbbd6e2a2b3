"""Files neurondesk reads that someone else may have put there (a price table, a saved neuron-ls
output, a run's journal or summary, a fallback record): opened only when they are regular files,
and read only up to a size bound.

Why: a ``prices.json`` that is a link to ``/dev/zero`` is read forever while memory grows, and a
FIFO blocks ``open()`` until a writer comes. Here the path is checked (``stat``, links followed:
a link to a regular file of yours is fine), opened without blocking (``O_NONBLOCK``: a FIFO put
there between the check and the open does not hang us), and checked again on the open file.
Anything else is an InputRefused whose message is one line naming the file and what it is.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


class InputRefused(OSError, ValueError):
    """A file that is not a regular file, or larger than its bound; the message is one line. An
    OSError (and a ValueError): every reader that already says "cannot read X" says this too."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, words in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return words
    return "of an unknown kind"


def _refused(path: Path | str, mode: int, what: str) -> InputRefused:
    return InputRefused(f"{path} is {kind_of(mode)}, not a regular file ({what} is read only from one"
                        + (", never through a link)" if stat.S_ISLNK(mode) else ")"))


def open_regular(path: Path | str, what: str, *, follow: bool = True) -> int:
    """A read-only descriptor on ``path`` once it is known to be a regular file (else InputRefused;
    a missing or unreadable one raises OSError). ``follow=False``: a symlink is refused too (ELOOP)."""
    st = os.stat(path, follow_symlinks=follow)
    if not stat.S_ISREG(st.st_mode):
        raise _refused(path, st.st_mode, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the check and the open
            raise _refused(path, st.st_mode, what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular_stream(path: Path | str, what: str, *, follow: bool = True) -> BinaryIO:
    """As open_regular, as a buffered binary file (for readers that go line by line)."""
    return os.fdopen(open_regular(path, what, follow=follow), "rb")


def read_regular(path: Path | str, what: str, max_bytes: int, *, follow: bool = True) -> bytes:
    """The whole of a regular file of at most ``max_bytes`` (else InputRefused, one line). A file that
    grows past the bound while it is read is refused as well: never more than max_bytes + 1 is read."""
    fd = open_regular(path, what, follow=follow)
    try:
        if os.fstat(fd).st_size > max_bytes:
            raise InputRefused(too_large(path, what, max_bytes))
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputRefused(too_large(path, what, max_bytes))
    return data


def too_large(path: Path | str, what: str, max_bytes: int) -> str:
    return f"{path} is larger than {_size(max_bytes)}, not read ({what} is far smaller)"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def bounded_lines(f: BinaryIO, limit: int) -> Iterator[tuple[bytes, int]]:
    """The lines of ``f`` as (line, 0); a line longer than ``limit`` (its newline not counted) as
    (b"", its length), read through in pieces of at most 1 MiB and let go of once past the limit,
    never held whole."""
    piece_max = min(limit + 2, 1 << 20)
    while True:
        piece = f.readline(piece_max)
        if not piece:
            return
        pieces: list[bytes] | None = [piece]
        size = len(piece)
        while not piece.endswith(b"\n"):
            piece = f.readline(piece_max)
            if not piece:
                break
            size += len(piece)
            if pieces is not None:
                pieces.append(piece)
                if size > limit + 1:
                    pieces = None
        if pieces is not None and size - piece.endswith(b"\n") > limit:
            pieces = None
        yield (b"".join(pieces), 0) if pieces is not None else (b"", size)
