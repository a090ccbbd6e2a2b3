"""Secrets given to neurondesk (the webhook URL of ``--notify-url-file``, ``NEURONDESK_NOTIFY_URL``):
read so that no other user of the machine can see them, and kept out of what the workload inherits.

A command line is world-readable (``ps``, ``/proc/PID/cmdline``) for the whole run; a file of the
user's alone (mode 0600, owned by them) and an environment variable (``/proc/PID/environ`` is the
owner's only) are not. The file is opened without following a symlink and without blocking, must
be a regular file, and is read up to a bound; a refusal is one line naming the file and what to do,
and never quotes what the file holds.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from neurondesk.store.input_files import kind_of

NOTIFY_URL_ENV = "NEURONDESK_NOTIFY_URL"
# Variables holding a secret of neurondesk's: never passed on to the workload or the recorder's children
PRIVATE_ENV = (NOTIFY_URL_ENV,)
MAX_SECRET_BYTES = 8 << 10  # a webhook URL is far shorter


class SecretRefused(ValueError):
    """A secret file that could be read or replaced by others, or is not one line; one line, no content."""


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without neurondesk's own secrets (what a child process may inherit)."""
    return {k: v for k, v in env.items() if k not in PRIVATE_ENV}


def _owner(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return f"uid {uid}"


def read_secret_file(path: Path | str, what: str = "--notify-url-file") -> str:
    """The one line of text in ``path``, a regular file of this user's that nobody else may read or
    write (mode 0600 or stricter), never through a symlink, at most MAX_SECRET_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SecretRefused(f"{what} {path} is a symbolic link: give the file itself "
                                "(a secret is never read through a link)") from e
        raise SecretRefused(f"{what} {path}: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SecretRefused(f"{what} {path} is {kind_of(st.st_mode)}, not a regular file: give a file "
                                "holding the URL")
        if st.st_uid != os.geteuid():
            raise SecretRefused(f"{what} {path} belongs to {_owner(st.st_uid)}, not to you: another user could "
                                "read or change it; keep the URL in a file of your own (chmod 600)")
        if st.st_mode & 0o077:
            raise SecretRefused(f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}: others on this "
                                f"machine could read or change it; `chmod 600 {path}`, then start again")
        data = b""
        while len(data) <= MAX_SECRET_BYTES:
            chunk = os.read(fd, MAX_SECRET_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_SECRET_BYTES:
        raise SecretRefused(f"{what} {path} is larger than {MAX_SECRET_BYTES >> 10} KiB: give a file holding "
                            "the URL alone")
    try:
        lines = [line.strip() for line in data.decode("utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise SecretRefused(f"{what} {path} is not UTF-8 text: give a file holding the URL alone") from None
    if len(lines) != 1:
        raise SecretRefused(f"{what} {path} {'is empty' if not lines else f'holds {len(lines)} lines'}: "
                            "give a file holding the URL alone, on one line")
    return lines[0]
