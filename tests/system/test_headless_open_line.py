"""The status line and a workload line left open (a tqdm bar that stops redrawing): in a terminal
the status line never draws over a bar being drawn, but once the open line is stale for a few
seconds it shows below it, on a fresh line; in a log (not a terminal) it is never glued onto it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from conftest import REPO, base_env

from neurondesk.core.reduce.state import RunState
from neurondesk.views.headless import HeadlessPrinter

OPEN_BAR = r"""
import os, sys, time
sys.stdout.write("\rbar 1/2")
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):  # the test saw the status line below the bar: go on
    time.sleep(0.05)
sys.stdout.write("\rbar 2/2\n")
print("end", flush=True)
"""


def test_a_stale_open_bar_gets_the_status_line_below_it_in_a_terminal(tmp_path):
    go = str(tmp_path / "go")
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--price-per-hour", "1",
                          "--run-dir", str(tmp_path / "run"), "--", sys.executable, "-c", OPEN_BAR, go],
                         stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=base_env(tmp_path), cwd=REPO)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 90
        while b"neurondesk: " not in seen.partition(b"bar 1/2")[2]:
            assert p.poll() is None and time.monotonic() < deadline, seen
            if select.select([master], [], [], 0.2)[0]:
                seen += os.read(master, 65536)
        open(go, "w").close()
        while p.poll() is None or select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    after_bar = seen.partition(b"bar 1/2")[2]
    # below the bar: a fresh line first (the pty turns \n into \r\n), never drawn over the bar's line
    assert after_bar.startswith(b"\r\n\r\x1b[K") and after_bar[len(b"\r\n\r\x1b[K"):].startswith(b"neurondesk: ")
    assert b"bar 2/2" in seen and b"end" in seen


def test_in_a_log_the_status_line_is_never_glued_onto_an_open_line(tmp_path):

    class Err:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    class Source:
        state = None

    err = Err()
    printer = HeadlessPrinter(Source(), out=err, err=err)
    err.text = "  5%|#   | 1/20 [00:01<00:19, 1.00it/s]"  # the workload's bar, open
    printer.at_line_start = False
    printer.source.state = RunState()
    printer._show_status(time.time())
    bar, _, status = err.text.partition("1.00it/s]")
    assert status.startswith("\nneurondesk: ")
