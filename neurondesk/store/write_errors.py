"""What to tell the user when a write fails, by its cause: a full disk is not a permission problem.

``advice(errno)`` is the clause after the error ("free disk space", "make it writable by you"
...); ``is_disk_full(errno)`` says whether freeing space is the cure."""

from __future__ import annotations

import errno as E

_SPACE = frozenset({E.ENOSPC, E.EDQUOT, E.EFBIG})


def is_disk_full(code: int | None) -> bool:
    return code in _SPACE


def cause_errno(exc: BaseException | None) -> int | None:
    """The errno of ``exc`` or of the OSError it was raised from (a JournalError wraps one)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, OSError) and exc.errno is not None:
            return exc.errno
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def advice(code: int | None, where: str) -> str:
    """What to do about a failed write in ``where`` (a folder or file), by errno."""
    if code in _SPACE:
        return "free disk space"
    if code in (E.EACCES, E.EPERM):
        return (f"{where} is not writable by this user (permissions, ownership or an immutable flag: "
                f"check `ls -ld {where}` and `lsattr`)")
    if code == E.EROFS:
        return f"the filesystem holding {where} is read-only: remount it writable or use another folder"
    if code == E.EIO:
        return f"the disk holding {where} reported an I/O error: check it (dmesg)"
    return f"make {where} writable"
