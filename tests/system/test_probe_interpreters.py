"""Every interpreter a user brings: trn1 images ship older Pythons, TorchNeuron runs on 3.12-3.14.
The bootstrap and the probe load and hand over cleanly (the user's own sitecustomize still runs)
in each Python from 3.7 on that this machine has; a script that imports nothing of torch runs
with its output intact and is recorded; below 3.7 (and in Python 2) the probe says once, in a
notice, that it is not loaded, and the program runs as alone. Interpreters are looked for in
pyenv's folder and /usr/bin; a version this machine lacks is skipped and named."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, Run, base_env

WANTED = ["2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14"]
PLAIN = "import sys\nfor i in range(3):\n    print('line %d of %d.%d' % ((i,) + tuple(sys.version_info[:2])))\n"
CHECK = ("import os, sys\n"
         "p = sys.modules.get('_neurondesk_probe')\n"
         "print('probe-installed=%s user-sitecustomize=%s' % (p is not None and p._probe is not None,"
         " os.environ.get('USER_SITECUSTOMIZE')))\n")


def _interpreter(version: str) -> str | None:
    roots = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python"))) + \
        sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python")) + [f"/usr/bin/python{version}"]
    for exe in roots:
        if os.access(exe, os.X_OK):
            return exe
    return None


def _run(tmp, exe: str, script, env) -> Run:
    run_dir = tmp / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1", "--run-dir",
           str(run_dir), "--", exe, str(script)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    return Run(p.returncode, p.stdout, p.stderr, run_dir)


@pytest.fixture
def user_sitecustomize(tmp_path):
    folder = tmp_path / "usersite"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
    return folder


@pytest.mark.parametrize("version", WANTED)
def test_the_probe_loads_or_says_why_in_every_interpreter(tmp_path, version, user_sitecustomize):
    exe = _interpreter(version)
    if exe is None:
        pytest.skip(f"no Python {version} on this machine (looked in ~/.pyenv/versions and /usr/bin)")
    env = base_env(tmp_path)
    env["PYTHONPATH"] = str(user_sitecustomize)
    for var in ("PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(var, None)
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    alone = subprocess.run([exe, str(script)], capture_output=True, env=env, timeout=60)
    (tmp_path / "a").mkdir()
    run = _run(tmp_path / "a", exe, script, env)
    run.returncode == 0 or pytest.fail(run.stderr[-2000:])
    # the run is recorded, the output is the script's own, byte for byte, nothing of ours on stderr
    assert (run.run_dir / "stdout.log").read_bytes() == alone.stdout
    assert (run.run_dir / "stderr.log").read_bytes() == alone.stderr == b""
    kinds = [e["kind"] for e in run.events]
    assert kinds[0] == "run_started" and kinds.count("run_finished") == 1
    notices = [e["message"] for e in run.events if e["kind"] == "notice" and e.get("source") == "probe"]

    check = tmp_path / "check.py"
    check.write_text(CHECK)
    (tmp_path / "b").mkdir()
    checked = _run(tmp_path / "b", exe, check, env)
    said = (checked.run_dir / "stdout.log").read_text()
    if tuple(int(x) for x in version.split(".")) >= (3, 7):
        assert said == "probe-installed=True user-sitecustomize=ran\n"
        assert notices == []
    else:
        assert said == "probe-installed=False user-sitecustomize=ran\n"
        assert len(notices) == 1 and f"Python {version} is older than 3.7" in notices[0]
        assert "runs unobserved" in notices[0]


def test_the_tests_own_interpreter_is_among_them():
    # the parametrised test above is not all skips: the venv's own Python is always there
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in WANTED
