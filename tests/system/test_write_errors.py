"""Messages that do not mislead (issue 24, item 13): a write refused by a permission or an immutable
flag never tells the user to free disk space; a --run-dir that names a file is one clear line."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, base_env

from neurondesk.store.write_errors import advice, cause_errno


def nd(home, *args, prefix=()):
    return subprocess.run([*prefix, sys.executable, "-m", "neurondesk.cli", *args], capture_output=True,
                          text=True, cwd=REPO, env=base_env(home), timeout=120)


def test_advice_follows_the_cause():
    assert advice(errno.ENOSPC, "/r") == "free disk space" and advice(errno.EDQUOT, "/r") == "free disk space"
    for code in (errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO):
        assert "free disk space" not in advice(code, "/r") and "/r" in advice(code, "/r")
    try:
        try:
            raise PermissionError(errno.EACCES, "Permission denied")
        except OSError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as wrapped:
        assert cause_errno(wrapped) == errno.EACCES


def test_a_run_dir_that_is_a_file_is_one_clear_line(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine\n")
    p = nd(tmp_path / "home", "run", "--headless", "--price-per-hour", "1", "--run-dir", str(f), "--", "true")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert lines == [f"neurondesk: --run-dir {f} is a file, not a folder: give a folder (made if it does not "
                     "exist), or leave --run-dir out for a new one under the data folder"], p.stderr
    assert f.read_text() == "mine\n"


def _without_dac_override():
    """A prefix that runs the CLI with permissions enforced: as root, without CAP_DAC_OVERRIDE."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop CAP_DAC_OVERRIDE as root")
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--")


def test_a_run_folder_made_unwritable_mid_run_is_not_called_a_full_disk(tmp_path):
    run_dir = tmp_path / "r"
    lock = f"import os, time; os.chmod({str(run_dir)!r}, 0o500); print('locked', flush=True); time.sleep(0.3)"
    try:
        p = nd(tmp_path / "home", "run", "--headless", "--price-per-hour", "1", "--run-dir", str(run_dir), "--",
               sys.executable, "-c", lock, prefix=_without_dac_override())
    finally:
        run_dir.chmod(0o700)
    assert p.returncode == 0, p.stderr
    said = [line for line in p.stderr.splitlines() if "cannot write the summary" in line]
    assert said, p.stderr
    assert "free disk space" not in p.stderr and "filled up" not in p.stderr, p.stderr
    assert "Permission denied" in said[0] and "not writable by this user" in said[0], said


def test_a_journal_that_refuses_writes_is_not_called_a_full_disk(tmp_path):
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("chattr +i (as root) makes the open journal refuse writes with EPERM")
    run_dir = tmp_path / "r"
    events = run_dir / "events.jsonl"
    # the workload sets the immutable flag on the journal, then prints for a while (each line an event)
    work = ("import subprocess, sys, time\n"
            f"if subprocess.run(['chattr', '+i', {str(events)!r}]).returncode: sys.exit(9)\n"
            "for i in range(15):\n"
            "    print('line', i, flush=True); time.sleep(0.1)\n")
    try:
        p = nd(tmp_path / "home", "run", "--headless", "--price-per-hour", "1", "--run-dir", str(run_dir), "--",
               sys.executable, "-c", work)
    finally:
        subprocess.run(["chattr", "-i", str(events)], check=False)
    if p.returncode == 9:
        pytest.skip("this filesystem has no immutable flag")
    assert p.returncode == 0, p.stderr
    assert "free disk space" not in p.stderr and "is full" not in p.stderr and "filled up" not in p.stderr, p.stderr
    journal = [line for line in p.stderr.splitlines() if "cannot write the event journal" in line]
    assert journal and "Operation not permitted" in journal[0] and "not writable by this user" in journal[0], p.stderr
    assert "could not be written to the end" in p.stderr  # the fallback, named without blaming the disk
