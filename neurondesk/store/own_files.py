"""Files of a run that neurondesk writes into (the journal and its fallback remainder, the lock):
made by the open itself (``O_CREAT|O_EXCL|O_NOFOLLOW``), so a file or symlink planted at the path
after the folder checks (a race) is refused rather than written through; where one is opened again
(a journal continued, the lock the launcher made), it must be the very file made then: its
``(st_dev, st_ino)`` is kept and compared with ``fstat`` of what the open gave. A refusal is a
NotOurFile whose message is one line naming the file and what to do.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from neurondesk.store.input_files import kind_of


@dataclass(frozen=True)
class FileId:
    """Which file: (device, inode)."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls(st.st_dev, st.st_ino)

    @classmethod
    def of_fd(cls, fd: int) -> FileId:
        return cls.of(os.fstat(fd))


class NotOurFile(OSError):
    """A file at a run file's path that neurondesk did not make; the message is one line."""


def planted_words(path: Path | str, what: str, kind: str = "something") -> str:
    return (f"refusing {what} {path}: {kind} was there before neurondesk made it (planted after the folder "
            "check?) and it is never written through; look at it, remove it or give another --run-dir, then "
            "start again")


def _kind_at(path: Path | str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "something"
    return "a file" if stat.S_ISREG(mode) else kind_of(mode)


def create_new(path: Path | str, flags: int, what: str, mode: int = 0o600) -> tuple[int, FileId]:
    """``path`` made now by this open (never an existing file, never through a symlink)."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileExistsError as exc:  # a symlink at the path is EEXIST too: O_EXCL never follows one
        raise NotOurFile(planted_words(path, what, _kind_at(path))) from exc
    return fd, FileId.of_fd(fd)


def reopen_same(path: Path | str, flags: int, expect: FileId, what: str) -> int:
    """``path`` opened again (no O_CREAT), only when it is still the file ``expect`` names."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotOurFile(replaced_words(path, what, "a symbolic link")) from exc
        if exc.errno == errno.ENOENT:
            raise NotOurFile(replaced_words(path, what, "gone")) from exc
        raise
    if FileId.of_fd(fd) != expect:
        os.close(fd)
        raise NotOurFile(replaced_words(path, what, "another file"))
    return fd


def replaced_words(path: Path | str, what: str, now: str) -> str:
    return (f"refusing {what} {path}: it is {now}, not the file neurondesk made for this run (replaced since?), "
            "and it is never written through; look at it, remove it or give another --run-dir, then start again")


def private_file_problem(st: os.stat_result) -> str | None:
    """Why an open file (its fstat) is no private regular file of this user with one name."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}"
    if st.st_mode & 0o077:
        return f"mode {stat.S_IMODE(st.st_mode):04o}"
    if st.st_nlink > 1:
        return "a hard link"
    return None
