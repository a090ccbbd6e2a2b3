"""`run --headless` passes the workload's own bytes through unchanged, as they are written: a
progress bar that redraws itself with carriage returns shows each update before any newline."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from conftest import REPO, base_env

BAR = r"""
import os, sys, time
sys.stdout.write("\x1b[32mgreen\x1b[0m and bytes \xe2\x9c\x93\n".encode("latin-1").decode("utf-8"))
sys.stdout.flush()
for i in range(3):
    sys.stdout.write(f"\rprogress {i}/3")
    sys.stdout.flush()
    while not os.path.exists(sys.argv[1] + str(i)):  # the test saw this update: go on
        time.sleep(0.02)
sys.stdout.write("\n")
print("end", flush=True)
"""


def test_progress_bar_updates_pass_through_as_written(tmp_path):
    go = str(tmp_path / "go")
    p = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                          "--run-dir", str(tmp_path / "run"), "--", sys.executable, "-c", BAR, go],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env(tmp_path), cwd=REPO)
    seen = b""
    try:
        for i in range(3):
            want = f"\rprogress {i}/3".encode()
            deadline = time.monotonic() + 60
            while want not in seen:
                assert time.monotonic() < deadline, f"never saw {want!r} before its newline: {seen!r}"
                r, _, _ = select.select([p.stdout], [], [], 0.2)
                if r:
                    seen += os.read(p.stdout.fileno(), 65536)
            assert not seen.endswith(b"\n")  # the bar's line is still open: it came as it was drawn
            open(go + str(i), "w").close()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    seen += out
    assert p.returncode == 0, err
    workload = "\x1b[32mgreen\x1b[0m and bytes ✓\n\rprogress 0/3\rprogress 1/3\rprogress 2/3\nend\n".encode()
    assert seen.startswith(workload)  # byte for byte, colours and carriage returns included
    assert b"neurondesk summary" in seen[len(workload):]
