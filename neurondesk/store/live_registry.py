"""The registry of live runs: one small entry per live run in ``<data folder>/live/`` (beside the
run root), written by the recorder when it starts and removed when it ends, naming the run folder
wherever it is (a ``--run-dir`` far from the data folder included), so that ``ls``, ``attach ID``
and ``history`` find every live run.

An entry is never believed by itself. A run is live while its folder's ``recorder.lock`` is held
(store/liveness.py) by the recorder the entry names: the lock file the entry recorded (its device
and inode), and the recorder whose pid ``recorder.json`` names. An entry whose recorder is gone (one
killed with SIGKILL cannot remove its own) is removed by the next reader.

A folder moved or deleted while its recorder runs: the lock file is no longer at the entry's path.
The reader looks for it among that recorder's open files (``/proc/PID/fd``, Linux) and tries its
lock there: held, the recorder lives, and the open file's path says where the folder is now, or
that it was deleted. Not found or not held: the entry is stale.

Private: the folder is 0700 and the entries 0600; every entry is opened relative to the folder's
own descriptor with ``O_NOFOLLOW`` (a symlinked folder or entry is never followed); a folder owned
by another user, or writable by its group or others, is refused (its entries could be anyone's).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from neurondesk.store.liveness import read_recorder_info
from neurondesk.store.rundir import LIVE_DIR, RunPaths

ENTRY_SUFFIX = ".json"
ENTRY_MAX_BYTES = 16384
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PROC = "/proc"


class RegistryRefused(Exception):
    """The registry folder cannot be used; the message says which folder, why and what to do."""


@dataclass(frozen=True)
class Entry:
    name: str  # the file's name in the registry
    run_id: str
    run_dir: str  # absolute, as the recorder was started with it
    pid: int  # the recorder's
    started: float  # Unix seconds
    lock_dev: int
    lock_ino: int


@dataclass(frozen=True)
class RegisteredRun:
    """An entry whose recorder lives."""

    entry: Entry
    run_dir: Path | None  # where the run is now; None: its folder was deleted
    note: str | None = None  # moved or deleted while live: one line saying so


def registry_dir(run_root: Path) -> Path:
    """``<data folder>/live``: beside ``<data folder>/runs``."""
    return Path(run_root).parent / LIVE_DIR


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _refuse(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"the live-run registry {path} is not a folder; remove it (neurondesk makes a private one)"
    if st.st_uid != os.geteuid():
        return (f"the live-run registry {path} is owned by {_owner(st.st_uid)}, not by you; its entries are "
                "not read. Point NEURONDESK_HOME at a data folder of your own")
    if st.st_mode & 0o022:
        return (f"the live-run registry {path} is writable by {'its group' if st.st_mode & 0o020 else 'others'} "
                f"(mode {stat.S_IMODE(st.st_mode):o}); its entries are not read (they could be anyone's). "
                f"`chmod 700 {path}` makes it private again")
    return None


def _open_dir(path: Path, create: bool) -> int | None:
    """The registry folder's descriptor, checked; None when it does not exist (and ``create`` is false)."""
    if create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise RegistryRefused(f"the live-run registry {path} is a symlink; it is not followed. Remove it "
                                  "(neurondesk makes a private folder there)") from exc
        why = _refuse(path, st) if st is not None else None
        raise RegistryRefused(why or f"cannot open the live-run registry {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        why = _refuse(path, st)
        if why is not None:
            raise RegistryRefused(why)
        if stat.S_IMODE(st.st_mode) & 0o077:  # readable by others (made by hand): private again
            os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def entry_name(run_dir: Path | str, pid: int) -> str:
    digest = hashlib.sha256(os.fsencode(os.path.abspath(run_dir))).hexdigest()[:16]
    return f"{digest}-{pid}{ENTRY_SUFFIX}"


class Registration:
    """A live run's entry, held by its recorder; ``remove()`` when the recording ends."""

    def __init__(self, registry: Path, name: str) -> None:
        self.registry = registry
        self.name: str | None = name

    @property
    def path(self) -> Path | None:
        return None if self.name is None else self.registry / self.name

    def remove(self) -> None:
        """Idempotent; never raises (a stale entry is the next reader's to remove)."""
        name, self.name = self.name, None
        if name is None:
            return
        try:
            fd = _open_dir(self.registry, create=False)
        except (RegistryRefused, OSError):
            return
        if fd is None:
            return
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def register(registry: Path, run_id: str, run_dir: Path, lock_fd: int, pid: int, started: float) -> Registration:
    """Write the entry of a live run whose recorder (``pid``) holds the lock open on ``lock_fd``.
    Raises RegistryRefused or OSError (the run goes on without an entry; the caller says so)."""
    st = os.fstat(lock_fd)
    text = json.dumps({"run_id": run_id, "run_dir": os.path.abspath(run_dir), "pid": pid, "started": started,
                       "lock": [st.st_dev, st.st_ino]})
    name = entry_name(run_dir, pid)
    tmp = f".{name}.tmp"  # readers skip dot names: an entry appears whole or not at all
    dfd = _open_dir(registry, create=True)
    try:
        try:
            os.unlink(tmp, dir_fd=dfd)  # left by a recorder killed half-way, with our pid
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)
    return Registration(registry, name)


def _parse(name: str, raw: bytes) -> Entry | None:
    try:
        d = json.loads(raw)
        lock = d["lock"]
        e = Entry(name=name, run_id=d["run_id"], run_dir=d["run_dir"], pid=d["pid"], started=d["started"],
                  lock_dev=lock[0], lock_ino=lock[1])
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None
    ok = (isinstance(e.run_id, str) and e.run_id and isinstance(e.run_dir, str) and os.path.isabs(e.run_dir)
          and all(isinstance(v, int) and not isinstance(v, bool) for v in (e.pid, e.lock_dev, e.lock_ino))
          and e.pid > 0 and isinstance(e.started, int | float) and not isinstance(e.started, bool))
    return e if ok else None


def _read_entry(dfd: int, name: str) -> Entry | None:
    """None for anything that is not a plain private file of ours holding an entry (a symlink
    included: never followed)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > ENTRY_MAX_BYTES:
            return None
        raw = os.read(fd, ENTRY_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _parse(name, raw)


def _held(fd: int) -> bool:
    """Someone else holds an exclusive flock on this file."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # we got it: nobody holds it (closing our descriptor lets it go)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)


def _at_its_path(e: Entry) -> bool | None:
    """True: its recorder holds the lock in the folder the entry names; False: that lock is not
    held by it (stale); None: that folder's lock file is not the entry's (moved, deleted, replaced)."""
    try:
        fd = os.open(RunPaths(e.run_dir).recorder_lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (e.lock_dev, e.lock_ino):
            return None
        if not _held(fd):
            return False
    finally:
        os.close(fd)
    info = read_recorder_info(e.run_dir)  # a later recorder of the same folder holds it: not this entry's
    return info is None or info.pid == e.pid


def _held_elsewhere(e: Entry) -> str | None:
    """The path of the entry's lock file as its recorder's open descriptor has it now ("... (deleted)"
    when deleted), if that recorder lives and holds it; else None."""
    fd_dir = os.path.join(_PROC, str(e.pid), "fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None  # no such process (or no /proc here): nothing says it lives
    for n in names:
        link = os.path.join(fd_dir, n)
        try:
            st = os.stat(link)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) != (e.lock_dev, e.lock_ino):
            continue
        try:
            fd = os.open(link, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return os.readlink(link) if _held(fd) else None
        except OSError:
            return None
        finally:
            os.close(fd)
    return None


DELETED_MARK = " (deleted)"


def _locate(e: Entry) -> RegisteredRun | None:
    here = _at_its_path(e)
    if here is True:
        return RegisteredRun(e, Path(e.run_dir))
    if here is False:
        return None
    where = _held_elsewhere(e)
    if where is None:
        return None
    if where.endswith(DELETED_MARK) or not os.path.isabs(where):
        return RegisteredRun(e, None, (
            f"run {e.run_id}: its folder {e.run_dir} was deleted while its recorder (pid {e.pid}) still runs; "
            f"what it records now cannot be read (`kill {e.pid}` ends that recording; the workload runs on)"))
    now = Path(where).parent
    return RegisteredRun(e, now, f"run {e.run_id} was moved while live: its folder is now {now} (was {e.run_dir})")


def live_entries(registry: Path, ended: list[Entry] | None = None) -> list[RegisteredRun]:
    """The registry's live runs, newest first. Entries whose recorder is gone, and files that are
    not entries, are removed; with ``ended``, an entry whose recorder is gone is put there and
    kept instead (its run may lack its index row: sources/ended.py settles it, then removes it
    with remove_entry). Raises RegistryRefused (the message is one line)."""
    dfd = _open_dir(registry, create=False)
    if dfd is None:
        return []
    try:
        out = []
        for name in os.listdir(dfd):
            if name.startswith(".") or not name.endswith(ENTRY_SUFFIX):
                continue
            e = _read_entry(dfd, name)
            found = _locate(e) if e is not None else None
            if found is None and e is not None and ended is not None:
                ended.append(e)
                continue
            if found is None:
                try:
                    os.unlink(name, dir_fd=dfd)  # stale, or not an entry: never believed, never followed
                except OSError:
                    pass
                continue
            out.append(found)
    finally:
        os.close(dfd)
    out.sort(key=lambda r: (r.entry.started, r.entry.run_id), reverse=True)
    return out


def folder_now(run_dir: Path | str, lock_fd: int) -> Path | None:
    """For the recorder holding ``lock_fd`` open (its ``run_dir/recorder.lock``): where that folder
    is now. ``run_dir`` when it is still there; the new folder when it was moved while live; None
    when it was deleted, or when this system cannot tell (no ``/proc``)."""
    st = os.fstat(lock_fd)
    try:
        here = os.stat(RunPaths(run_dir).recorder_lock, follow_symlinks=False)
        if (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino):
            return Path(run_dir)
    except OSError:
        pass
    try:
        where = os.readlink(os.path.join(_PROC, "self", "fd", str(lock_fd)))
    except OSError:
        return None
    if where.endswith(DELETED_MARK) or not os.path.isabs(where):
        return None
    return Path(where).parent


def remove_entry(registry: Path, name: str) -> None:
    """Remove an ended run's entry (settled: its row is written); never raises."""
    Registration(registry, name).remove()
