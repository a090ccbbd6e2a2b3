"""The registry of live runs: every live run is found wherever its folder is (`ls`, `attach ID`,
`attach PREFIX`, `history`), an entry is never believed over its folder's lock (a recorder killed
with SIGKILL leaves one; the next `ls` removes it), entries are private and never followed through
a symlink, a folder moved or deleted while live is said in one line, and two users' registries
stay apart (a real second user, made with useradd).

The workload is a `python -c` loop that prints and sleeps until a stop file appears: the tests end
the runs themselves, nothing depends on how fast this machine is."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO, base_env

from neurondesk.store.index import RunIndex
from neurondesk.store.journal import read_journal
from neurondesk.store.live_registry import RegistryRefused, live_entries, register, registry_dir
from neurondesk.store.liveness import (
    RecorderInfo,
    RecorderLock,
    read_recorder_info,
    recorder_alive,
    write_recorder_info,
)

ND = ["-m", "neurondesk.cli"]
LOOP = ("import os, sys, time\n"
        "while not os.path.exists(sys.argv[1]):\n"
        "    print('tick', flush=True)\n"
        "    time.sleep(0.1)\n")


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.1)
    return value


def user_env(tmp_path: Path) -> dict[str, str]:
    """The default data folder ($XDG_DATA_HOME/neurondesk), as a user without NEURONDESK_HOME has it."""
    env = base_env(tmp_path)
    env.pop("NEURONDESK_HOME")
    return env


def data_folder(env: dict[str, str]) -> Path:
    return Path(env["NEURONDESK_HOME"]) if env.get("NEURONDESK_HOME") else Path(env["XDG_DATA_HOME"]) / "neurondesk"


def nd(env, *args, py: str = sys.executable, user: str | None = None, timeout: float = 60):
    cmd = [py, *ND, *args]
    if user is not None:
        cmd = ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout)


def detach(env, run_dir: Path, stop: Path, py: str = sys.executable, user: str | None = None) -> Path:
    p = nd(env, "run", "--detach", "--price-per-hour", "1", "--run-dir", str(run_dir), "--", py, "-c", LOOP,
           str(stop), py=py, user=user)
    assert p.returncode == 0, p.stderr
    assert Path(p.stdout.strip()) == run_dir
    return run_dir


def entries(env) -> list[Path]:
    d = data_folder(env) / "live"
    return sorted(p for p in d.iterdir() if not p.name.startswith(".")) if d.is_dir() else []


def listed(ls_stdout: str) -> list[str]:
    """The ids of the live-run table of `ls`."""
    lines = ls_stdout.split("\n\n")[0].splitlines()
    return [] if not lines or not lines[0].startswith("live run") else [line.split()[0] for line in lines[1:]]


def end_runs(*stops_and_dirs: tuple[Path, Path]) -> None:
    for stop, _ in stops_and_dirs:
        stop.touch()
    for _, run_dir in stops_and_dirs:
        wait_until(lambda d=run_dir: not recorder_alive(d), 60, f"the recorder of {run_dir} to end")


# ---------------------------------------------------------------------------- in-process
def test_an_entry_is_private_points_at_its_folder_and_is_removed_once_its_lock_is_free(tmp_path):
    registry = registry_dir(tmp_path / "nd" / "runs")
    run_dir = tmp_path / "data" / "runs" / "exp7"  # not under the run root
    run_dir.mkdir(parents=True)
    lock = RecorderLock(run_dir)
    reg = register(registry, "exp7", run_dir, lock.fd, os.getpid(), 100.0)
    assert registry == tmp_path / "nd" / "live"
    assert stat.S_IMODE(registry.stat().st_mode) == 0o700
    assert stat.S_IMODE(reg.path.lstat().st_mode) == 0o600
    assert json.loads(reg.path.read_text())["run_dir"] == str(run_dir)
    [found] = live_entries(registry)
    assert (found.entry.run_id, found.run_dir, found.note) == ("exp7", run_dir, None)

    lock.release()  # as a recorder killed with SIGKILL: its lock is free, its entry still there
    assert reg.path.exists()
    assert live_entries(registry) == [] and not reg.path.exists()  # never believed: removed
    reg.remove()  # the recorder's own removal after a reader's: nothing to do, nothing raised


def test_an_entry_whose_folder_another_recorder_took_over_is_stale(tmp_path):
    registry = tmp_path / "live"
    run_dir = tmp_path / "exp7"
    run_dir.mkdir()
    lock = RecorderLock(run_dir)
    try:
        old = register(registry, "exp7", run_dir, lock.fd, 999_999_1, 1.0)  # a recorder that is gone
        new = register(registry, "exp7", run_dir, lock.fd, os.getpid(), 2.0)  # the one holding the lock now
        write_recorder_info(run_dir, RecorderInfo(os.getpid(), "unused.sock"))
        assert [r.entry.pid for r in live_entries(registry)] == [os.getpid()]
        assert not old.path.exists() and new.path.exists()
    finally:
        lock.release()


@pytest.mark.parametrize("how", ["symlink", "group-writable", "other-writable", "another user's"])
def test_a_registry_that_is_not_private_and_ours_is_refused_by_readers_and_the_recorder(tmp_path, how):
    real = tmp_path / "real-live"
    real.mkdir(mode=0o700)
    run_dir = tmp_path / "exp7"
    run_dir.mkdir()
    lock = RecorderLock(run_dir)
    try:
        planted = register(real, "exp7", run_dir, lock.fd, os.getpid(), 1.0)  # a live run's entry
        registry = real
        if how == "symlink":
            registry = tmp_path / "live"
            registry.symlink_to(real)
        elif how == "group-writable":
            real.chmod(0o770)
        elif how == "other-writable":
            real.chmod(0o703)
        else:
            if os.geteuid() != 0:
                pytest.skip("chown to another user needs root")
            os.chown(real, 65534, 65534)  # nobody
        expected = {"symlink": "is a symlink", "group-writable": "writable by its group",
                    "other-writable": "writable by others", "another user's": "owned by"}[how]
        with pytest.raises(RegistryRefused, match=expected):
            live_entries(registry)
        with pytest.raises(RegistryRefused, match=expected):
            register(registry, "exp8", run_dir, lock.fd, os.getpid(), 2.0)
        assert planted.path.exists() and len(os.listdir(real)) == 1  # nothing read, removed or added
    finally:
        lock.release()


def test_entries_are_never_followed_and_what_is_not_an_entry_is_removed(tmp_path):
    registry = tmp_path / "live"
    run_dir = tmp_path / "exp7"
    run_dir.mkdir()
    lock = RecorderLock(run_dir)
    try:
        good = register(registry, "exp7", run_dir, lock.fd, os.getpid(), 1.0)
        outside = tmp_path / "outside.json"  # an entry of a live run, but not in the registry
        outside.write_text(good.path.read_text())
        (registry / "link.json").symlink_to(outside)
        (registry / "junk.json").write_text("{not json")
        (registry / ".half.json.tmp").write_text("{")  # being written: skipped, kept
        (registry / "readme.txt").write_text("not an entry")  # not ours to judge: kept
        assert [r.entry.name for r in live_entries(registry)] == [good.name]
        assert sorted(os.listdir(registry)) == sorted([good.name, ".half.json.tmp", "readme.txt"])
        assert outside.read_text() == good.path.read_text()  # the symlink's target untouched
    finally:
        lock.release()


def test_a_readable_registry_of_ours_is_made_private_again(tmp_path):
    registry = tmp_path / "live"
    registry.mkdir()
    registry.chmod(0o755)
    assert live_entries(registry) == []
    assert stat.S_IMODE(registry.stat().st_mode) == 0o700


# ---------------------------------------------------------------------------- real detached runs
def test_live_runs_outside_the_home_are_listed_attached_and_in_history_and_a_killed_ones_entry_is_cleaned(tmp_path):
    env = user_env(tmp_path)
    data = tmp_path / "data" / "runs"  # where the user keeps runs: nowhere near the data folder
    exp7, exp8 = data / "exp7", data / "exp8-long"
    stop7, stop8 = tmp_path / "stop7", tmp_path / "stop8"
    detach(env, exp7, stop7)
    detach(env, exp8, stop8)
    try:
        assert len(entries(env)) == 2  # written as the recorders started, before `run` returned
        for e in entries(env):
            assert stat.S_IMODE(e.lstat().st_mode) == 0o600
        assert stat.S_IMODE((data_folder(env) / "live").stat().st_mode) == 0o700

        ls = nd(env, "ls")
        assert ls.returncode == 0 and ls.stderr == "", ls.stderr
        assert listed(ls.stdout) == ["exp8-long", "exp7"], ls.stdout  # newest first

        for arg, folder in (("exp7", exp7), ("exp8", exp8)):  # an id, a prefix
            viewer = subprocess.Popen([sys.executable, *ND, "attach", "--headless", arg], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
            wait_until(lambda v=viewer: b"neurondesk: " in _peek(v), 60, "the attached status line")
            viewer.send_signal(signal.SIGINT)  # detaches
            out, err = viewer.communicate(timeout=30)
            assert viewer.returncode == 0 and f"detached from {folder}" in err, err
        both = nd(env, "attach", "--headless", "exp")
        assert both.returncode == 2 and "'exp' matches 2 runs (exp7, exp8-long)" in both.stderr, both.stderr

        history = json.loads(nd(env, "history", "--format", "json").stdout)
        assert [(r["id"], r["state"], r["exit_code"]) for r in history] == [("exp8-long", "live", None),
                                                                           ("exp7", "live", None)]

        info = wait_until(lambda: read_recorder_info(exp8), 60, "recorder.json")
        os.kill(info.pid, signal.SIGKILL)
        wait_until(lambda: not recorder_alive(exp8), 30, "the killed recorder to be gone")
        assert len(entries(env)) == 2  # it could not remove its own entry
        ls = nd(env, "ls")
        assert ls.returncode == 0 and listed(ls.stdout) == ["exp7"], ls.stdout + ls.stderr
        # the killed recorder's run is listed as such, its row written from its journal (issue 24 item 10)
        assert "exp8-long: recorder lost at" in ls.stdout, ls.stdout
        [left] = entries(env)
        assert json.loads(left.read_text())["run_dir"] == str(exp7)
    finally:
        end_runs((stop7, exp7), (stop8, exp8))
    assert entries(env) == []  # removed by the recorder that ended
    ls = nd(env, "ls")
    assert listed(ls.stdout) == [] and "no live run" in ls.stdout
    history = json.loads(nd(env, "history", "--format", "json").stdout)
    # the index has both, from their folders: exp7 from its recorder, exp8-long from the `ls` after its recorder's death
    assert sorted((r["id"], r["state"]) for r in history) == [("exp7", "finished"), ("exp8-long", "finished")]
    reindex = nd(env, "reindex")  # rebuilt from the run folders: those outside the run root are kept
    assert reindex.returncode == 0 and reindex.stdout.startswith("indexed 2 run(s)"), reindex.stdout + reindex.stderr
    assert "(1 from their journals" in reindex.stdout  # exp8-long: its recorder never wrote a summary
    history = json.loads(nd(env, "history", "--format", "json").stdout)
    assert sorted((r["id"], r["state"]) for r in history) == [("exp7", "finished"), ("exp8-long", "finished")]


def _peek(proc) -> bytes:
    """What the process wrote on stderr so far (non-blocking; kept for communicate())."""
    import select

    buf = getattr(proc, "_seen", b"")
    while select.select([proc.stderr], [], [], 0)[0]:
        chunk = os.read(proc.stderr.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
    proc._seen = buf
    return buf


def test_a_folder_moved_or_deleted_while_live_is_said_in_one_line(tmp_path):
    env = user_env(tmp_path)
    data = tmp_path / "data"
    moved, deleted = data / "exp7", data / "exp9"
    stop7, stop9 = tmp_path / "stop7", tmp_path / "stop9"
    detach(env, moved, stop7)
    detach(env, deleted, stop9)
    pid9 = wait_until(lambda: read_recorder_info(deleted), 60, "recorder.json").pid  # written once the workload runs
    now = data / "exp7-kept"
    try:
        moved.rename(now)
        for _ in range(100):  # the live recorder and output relay may add a file while it goes
            shutil.rmtree(deleted, ignore_errors=True)
            if not deleted.exists():
                break
            time.sleep(0.05)
        assert not deleted.exists()
        ls = nd(env, "ls")
        assert ls.returncode == 0 and "Traceback" not in ls.stderr, ls.stderr
        lines = ls.stderr.splitlines()
        assert lines == [
            f"neurondesk: run exp9: its folder {deleted} was deleted while its recorder (pid {pid9}) still runs; "
            f"what it records now cannot be read (`kill {pid9}` ends that recording; the workload runs on)",
            f"neurondesk: run exp7 was moved while live: its folder is now {now} (was {moved})",
        ], ls.stderr
        assert listed(ls.stdout) == ["exp7-kept"], ls.stdout  # read where it is now
        assert len(entries(env)) == 2  # both recorders live: neither entry is stale

        gone = nd(env, "attach", "--headless", "exp9")
        assert gone.returncode == 2 and gone.stderr.count("\n") == 1 and "was deleted while" in gone.stderr, gone.stderr
        viewer = subprocess.Popen([sys.executable, *ND, "attach", "--headless", "exp7"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        wait_until(lambda: b"neurondesk: starting" in _peek(viewer) or b"| step" in _peek(viewer), 60,
                   "the attached status line")
        viewer.send_signal(signal.SIGINT)
        _, err = viewer.communicate(timeout=30)
        err = viewer._seen.decode() + err
        assert viewer.returncode == 0 and f"detached from {now}" in err and "was moved while live" in err, err
    finally:
        stop7.touch()
        stop9.touch()
        wait_until(lambda: not recorder_alive(now), 60, "the moved run's recorder to end")
        wait_until(lambda: not _alive(pid9), 60, "the deleted run's recorder to end")
    assert entries(env) == []
    # The moved run's recorder wrote its summary and index row where its folder is now.
    assert json.loads((now / "summary.json").read_text())["run_id"] == "exp7"
    rows = {r.id: r.run_dir for r in RunIndex(data_folder(env) / "runs" / "runs.sqlite").list_runs()}
    assert rows["exp7"] == str(now) and rows["exp9"] == str(deleted)
    # ... and followed the move while the run went on (at its next flush), not at its end: the checkpoints
    # and the journal's rotations went there from then on, none of them failed on the old path
    events, _ = read_journal(now / "events.jsonl")
    kinds = [e.kind for e in events]
    said = next(i for i, e in enumerate(events) if e.kind == "notice" and "was moved while the run was live" in e.message)
    assert said < kinds.index("run_finished"), [e.message for e in events if e.kind == "notice"]
    failed = ("checkpoint not written", "cannot start journal segment", "cannot close journal segment")
    assert not any(e.kind == "notice" and any(w in e.message for w in failed) for e in events)


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------------------- two users
def _interpreter_for(user: str, env: dict[str, str]) -> str | None:
    """A Python that ``user`` can run with this checkout and its packages importable (this one may
    live in root's home, which another user cannot enter)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for py in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if not os.path.exists(py):
            continue
        p = subprocess.run(["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), py, "-c",
                            "import neurondesk.cli.main, platformdirs, psutil, msgspec"],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
        if p.returncode == 0:
            return py
    return None


@pytest.fixture
def second_user():
    if os.geteuid() != 0:
        pytest.skip("making a second user needs root")
    name = f"ndt{uuid.uuid4().hex[:8]}"
    p = subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"useradd refused: {p.stderr.strip()}")
    try:
        import pwd

        yield pwd.getpwnam(name)
    finally:  # its processes end with their stop files; userdel refuses a user that still runs one
        deadline = time.monotonic() + 60
        while subprocess.run(["userdel", name], capture_output=True).returncode not in (0, 6):  # 6: gone
            if time.monotonic() > deadline:
                raise AssertionError(f"userdel {name} kept failing: a process of that user still runs")
            time.sleep(0.2)


def test_two_users_registries_are_kept_apart(second_user):
    other = second_user.pw_name
    base = Path(tempfile.mkdtemp(prefix="nd-two-users-"))
    base.chmod(0o755)  # both users can reach their own parts of it
    mine, theirs = base / "root", base / "other"
    mine.mkdir()
    mine.chmod(0o755)  # they may look in, as in a shared NEURONDESK_HOME; my registry stays 0700
    theirs.mkdir(mode=0o700)
    os.chown(theirs, second_user.pw_uid, second_user.pw_gid)
    my_env = user_env(mine)
    their_env = user_env(theirs)
    for sub in ("home", "config", "cache", "data"):
        os.chown(theirs / "user" / sub, second_user.pw_uid, second_user.pw_gid)
    path = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    their_env["PYTHONPATH"] = path
    their_py = _interpreter_for(other, their_env)
    if their_py is None:
        pytest.skip(f"no Python here that user {other} can run with neurondesk's packages")
    my_run, their_run = base / "runs-root" / "exp-a", theirs / "runs" / "exp-b"
    my_stop, their_stop = base / "stop-a", theirs / "stop-b"
    started: list[Path] = []
    try:
        _two_users(my_env, their_env, their_py, second_user, my_run, my_stop, their_run, their_stop, started)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _two_users(my_env, their_env, their_py, second_user, my_run, my_stop, their_run, their_stop, started):
    other = second_user.pw_name
    try:
        detach(my_env, my_run, my_stop)
        started.append(my_run)
        detach(their_env, their_run, their_stop, py=their_py, user=other)
        started.append(their_run)
        [theirs_entry] = entries(their_env)
        st = theirs_entry.lstat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (second_user.pw_uid, 0o600)

        mine_ls = nd(my_env, "ls")
        their_ls = nd(their_env, "ls", py=their_py, user=other)
        assert listed(mine_ls.stdout) == ["exp-a"], mine_ls.stdout + mine_ls.stderr
        assert listed(their_ls.stdout) == ["exp-b"], their_ls.stdout + their_ls.stderr

        # Their data folder pointed at mine (a shared NEURONDESK_HOME): my registry is refused, not read.
        shared = dict(their_env, NEURONDESK_HOME=str(data_folder(my_env)))
        data_folder(my_env).chmod(0o755)  # as a shared folder would be: they can see the registry in it
        refused = nd(shared, "ls", py=their_py, user=other)
        assert refused.returncode == 0 and listed(refused.stdout) == [], refused.stdout
        assert f"the live-run registry {data_folder(my_env) / 'live'} is owned by root (uid 0), not by you" \
            in refused.stderr, refused.stderr
        assert len(entries(my_env)) == 1  # nothing of mine removed by their reader
        attach = nd(shared, "attach", "--headless", "exp-a", py=their_py, user=other)
        assert attach.returncode == 2 and "no run 'exp-a'" in attach.stderr, attach.stderr
    finally:
        my_stop.touch()
        their_stop.touch()
        for run_dir in started:
            wait_until(lambda d=run_dir: not recorder_alive(d), 60, f"the recorder of {run_dir} to end")
    assert entries(my_env) == [] and entries(their_env) == []  # each recorder removed its own entry


def test_a_run_whose_data_folder_cannot_take_its_entry_goes_on_and_says_where_to_find_it(tmp_path):
    env = dict(base_env(tmp_path), NEURONDESK_HOME="/proc/neurondesk-test")  # no new folder, even for root
    run_dir = tmp_path / "data" / "exp7"
    p = nd(env, "run", "--headless", "--price-per-hour", "1", "--run-dir", str(run_dir), "--",
           sys.executable, "-c", "print('done')")
    assert p.returncode == 0, p.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit_code"] == 0
    [said] = [n for n in summary["notices"] if "registry of live runs" in n]
    assert said.startswith("this run is not in the registry of live runs (cannot write in /proc/neurondesk-test/live: ")
    assert said.endswith(f"find it only under its folder: `neurondesk attach {run_dir}`")
