"""The bootstrap never writes into the workload's streams: a probe that fails at start-up is
reported to the recorder over its socket, and the user's program runs with its output intact."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading

from conftest import REPO

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"


def test_a_probe_that_fails_at_start_up_says_so_to_the_recorder_not_to_the_workload(tmp_path):
    boot = tmp_path / "bootstrap"
    boot.mkdir()
    shutil.copy(BOOTSTRAP / "sitecustomize.py", boot / "sitecustomize.py")
    (boot / "_neurondesk_probe.py").write_text("def install():\n    raise RuntimeError('broken probe')\n")
    path = str(tmp_path / "s")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    got: list[bytes] = []

    def read():
        conn, _ = server.accept()
        with conn:
            got.append(conn.makefile("rb").read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p = subprocess.run([sys.executable, "-c", "print('user output')"], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(boot), "NEURONDESK_SOCKET": path, "PATH": "/usr/bin:/bin"})
    reader.join(10)
    server.close()
    assert p.returncode == 0 and p.stdout == "user output\n" and p.stderr == ""
    msg = json.loads(got[0])
    assert msg["kind"] == "notice" and "broken probe" in msg["message"] and msg["source"] == "probe"


def test_with_no_recorder_listening_the_failure_is_silent(tmp_path):
    boot = tmp_path / "bootstrap"
    boot.mkdir()
    shutil.copy(BOOTSTRAP / "sitecustomize.py", boot / "sitecustomize.py")
    (boot / "_neurondesk_probe.py").write_text("def install():\n    raise RuntimeError('broken probe')\n")
    p = subprocess.run([sys.executable, "-c", "print('user output')"], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(boot), "NEURONDESK_SOCKET": str(tmp_path / "nobody"),
                            "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0 and p.stdout == "user output\n" and p.stderr == ""
