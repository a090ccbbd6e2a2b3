"""Nothing another user plants breaks a run (issue 24, items 1 and 2), tried with a real second user
(made with useradd for these tests, removed after): a symlink at the --run-dir path, a folder that
user made first, files planted in it, a folder writable by others; and the fallback folder of a
full disk made first by that user."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import REPO, base_env

from neurondesk.store import fallback
from neurondesk.store.summary_files import write_atomic

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                                reason="needs root and useradd to make a real second user")


@pytest.fixture(scope="module")
def other():
    name = f"ndother{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def shared():
    """A sticky folder everyone may write in, like /tmp (pytest's own folders are root's alone)."""
    d = Path(tempfile.mkdtemp(dir="/tmp", prefix="nd-shared-"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        subprocess.run(["chattr", "-R", "-i", str(d)], check=False, capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def as_other(user: str, *cmd: str) -> None:
    subprocess.run(list(cmd), user=user, check=True)


def nd(home: Path, *args: str, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=env or base_env(home), timeout=120)


def run_in(home: Path, run_dir: Path, *extra: str, env: dict | None = None):
    return nd(home, "run", "--headless", "--price-per-hour", "1", "--run-dir", str(run_dir), *extra, "--",
              sys.executable, "-c", "print('secret output')", env=env)


def one_line(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    return lines[0]


def test_a_symlink_planted_at_the_run_dir_is_refused_and_not_followed(tmp_path, other, shared):
    target = shared / "theirs"
    as_other(other, "mkdir", "-m", "777", str(target))
    as_other(other, "ln", "-s", str(target), str(shared / "run"))
    line = one_line(run_in(tmp_path, shared / "run"))
    assert "is a symbolic link" in line and str(shared / "run") in line
    assert list(target.iterdir()) == []
    # a link to a folder of the user's own is refused too: the run writes only where it is named
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(mine)
    assert "is a symbolic link" in one_line(run_in(tmp_path, tmp_path / "link"))
    assert list(mine.iterdir()) == []


def test_a_folder_another_user_made_first_with_files_in_it_is_refused(tmp_path, other, shared):
    d = shared / "run"
    as_other(other, "mkdir", "-m", "777", str(d))
    for name in ("stdout.log", "summary.json.tmp", "recorder.json.tmp"):
        as_other(other, "install", "-m", "666", "/dev/null", str(d / name))
    line = one_line(run_in(tmp_path, d))
    assert f"belongs to {other}, not to you" in line
    assert sorted(p.name for p in d.iterdir()) == ["recorder.json.tmp", "stdout.log", "summary.json.tmp"]
    assert all(p.stat().st_size == 0 for p in d.iterdir())  # nothing of the run went into them


def test_a_folder_of_ones_own_writable_by_others_is_refused(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    line = one_line(run_in(tmp_path, d))
    assert "is writable by group and others (mode 0777)" in line and "chmod go-w" in line
    d.chmod(0o775)
    assert "writable by group (mode 0775)" in one_line(run_in(tmp_path, d))
    assert list(d.iterdir()) == []


def test_files_planted_in_ones_own_folder_are_refused_or_moved_aside_never_reused(tmp_path, other, shared):
    d = shared / "mine"
    d.mkdir()
    d.chmod(0o777)  # open for a while ...
    as_other(other, "install", "-m", "666", "/dev/null", str(d / "stdout.log"))
    as_other(other, "install", "-m", "666", "/dev/null", str(d / "summary.json.tmp"))
    d.chmod(0o700)  # ... then closed again, with their files in it
    line = one_line(run_in(tmp_path, d))
    assert "already holds" in line and f"({other}'s)" in line and "not reused" in line
    p = run_in(tmp_path, d, "--force")
    assert p.returncode == 0, p.stderr
    for name in ("stdout.log", "summary.json", "events.jsonl", "recorder.json"):
        st = os.lstat(d / name)
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600, name
    assert (d / "stdout.log").read_text() == "secret output\n"
    [aside] = d.glob("previous-*")
    assert sorted(p.name for p in aside.iterdir()) == ["stdout.log", "summary.json.tmp"]
    assert (aside / "stdout.log").stat().st_size == 0  # theirs got nothing


def test_a_temporary_file_at_the_name_is_replaced_never_written_through(tmp_path, other, shared):
    d = shared / "own"
    d.mkdir(mode=0o700)
    d.chmod(0o777)
    as_other(other, "install", "-m", "666", "/dev/null", str(d / "summary.json.tmp"))
    theirs = os.lstat(d / "summary.json.tmp").st_ino
    keep = d / "summary.json.tmp.theirs"
    os.link(d / "summary.json.tmp", keep)
    write_atomic(d / "summary.json", '{"run_id": "x"}')
    st = os.lstat(d / "summary.json")
    assert st.st_ino != theirs and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600
    assert keep.read_text() == ""  # their file never saw the summary


def test_a_fallback_folder_another_user_made_first_is_not_used(tmp_path, other, shared, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    fixed = shared / f"neurondesk-fallback-{os.getuid()}"
    as_other(other, "mkdir", "-m", "777", str(fixed))
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    folder = fallback.make_fallback_dir(run_dir, roots=[fixed])
    assert folder.parent != fixed and folder.parent.name.startswith(f"{fixed.name}-") and folder.name == "r"
    for d in (folder, folder.parent):
        st = os.lstat(d)
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700
    assert list(fixed.iterdir()) == []
    # a fallback record that user plants for this run is not believed
    as_other(other, "mkdir", "-m", "777", str(fixed / "r2"))
    as_other(other, "sh", "-c", f"echo '{json.dumps({'run_id': 'r2', 'run_dir': str(tmp_path / 'r2'), 'journal_bytes_in_run_dir': 0})}'"
             f" > {fixed / 'r2' / 'fallback.json'}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "nodata"))
    assert fallback.find_fallback(tmp_path / "r2") is None
    # a symlink at the fixed name is refused as well
    shutil.rmtree(fixed)
    as_other(other, "ln", "-s", str(tmp_path), str(fixed))
    folder = fallback.make_fallback_dir(run_dir, roots=[fixed])
    assert folder.parent.name.startswith(f"{fixed.name}-")


def test_a_real_run_diverted_to_a_fallback_avoids_the_folder_another_user_made(tmp_path, other, shared):
    if shutil.which("chattr") is None:
        pytest.skip("chattr is needed to make the journal refuse writes")
    fixed = shared / f"neurondesk-fallback-{os.getuid()}"
    as_other(other, "mkdir", "-m", "777", str(fixed))
    env = base_env(tmp_path)
    env["TMPDIR"] = str(shared)
    data = Path(env["NEURONDESK_HOME"])  # the first root is $NEURONDESK_HOME/fallback when that is set
    data.mkdir(parents=True, exist_ok=True)
    (data / "fallback").write_text("not a folder\n")  # the first root unusable: the temporary one is tried
    run_dir = tmp_path / "r"
    events = run_dir / "events.jsonl"
    work = ("import subprocess, sys, time\n"
            f"if subprocess.run(['chattr', '+i', {str(events)!r}]).returncode: sys.exit(9)\n"
            "for i in range(12):\n"
            "    print('line', i, flush=True); time.sleep(0.1)\n")
    try:
        p = nd(tmp_path, "run", "--headless", "--price-per-hour", "1", "--run-dir", str(run_dir), "--",
               sys.executable, "-c", work, env=env)
    finally:
        subprocess.run(["chattr", "-i", str(events)], check=False)
    if p.returncode == 9:
        pytest.skip("this filesystem has no immutable flag")
    assert p.returncode == 0, p.stderr
    assert list(fixed.iterdir()) == []
    named = re.search(rf"the journal goes on in ({re.escape(str(fixed))}-[^/ ]+/r)\b", p.stderr)
    assert named, p.stderr
    folder = Path(named.group(1))
    assert os.lstat(folder.parent).st_uid == 0 and stat.S_IMODE(os.lstat(folder.parent).st_mode) == 0o700
    assert (folder / "summary.json").is_file() and (folder / "fallback.json").is_file()
