"""A stack dump on request (issue 26 item 5, the probe's side): a real workload process under the
probe dumps every thread's stack into stacks-<pid>.txt of the run's private folder on SIGUSR2,
read back by collectors/stacks.py:request_stacks; a program with a SIGUSR2 handler of its own
(set before or after the probe's) is never signalled, and its handler never runs for us."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import pytest
from conftest import REPO

from neurondesk.collectors.stacks import request_stacks, stacks_path

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"

PROGRAM = r"""
import signal, sys, threading, time
if sys.argv[1] == "own-handler-first":
    signal.signal(signal.SIGUSR2, lambda *a: print("user handler ran", flush=True))

def waiting_in_a_thread():
    time.sleep(60)

def waiting_here():
    threading.Thread(target=waiting_in_a_thread, daemon=True).start()
    if sys.argv[1] == "own-handler-later":
        signal.signal(signal.SIGUSR2, lambda *a: print("user handler ran", flush=True))
    print("ready", flush=True)
    time.sleep(60)

waiting_here()
"""


@pytest.fixture
def under_probe():
    folder = tempfile.mkdtemp(prefix="nd-st-")  # the run's private folder: the socket's
    path = os.path.join(folder, "probe.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    threading.Thread(target=lambda: [server.accept() for _ in range(4)], daemon=True).start()
    procs = []

    def start(mode: str) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=str(BOOTSTRAP), NEURONDESK_SOCKET=path)
        p = subprocess.Popen([sys.executable, "-c", PROGRAM, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        procs.append(p)
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        return p

    yield folder, start
    for p in procs:
        p.kill()
        p.communicate(timeout=30)
    server.close()
    shutil.rmtree(folder, ignore_errors=True)


def test_a_stack_dump_names_every_thread_and_leaves_the_process_running(under_probe):
    folder, start = under_probe
    p = start("plain")
    text = request_stacks(p.pid, folder, timeout=10)
    assert text is not None
    assert "waiting_here" in text and "waiting_in_a_thread" in text  # both threads, innermost frames named
    assert text.count("hread 0x") >= 2  # "Current thread 0x..." and "Thread 0x..."
    again = request_stacks(p.pid, folder, timeout=10)  # a second request reads the second dump alone
    assert again is not None and again.count("hread 0x") == text.count("hread 0x")
    assert p.poll() is None  # still running: the dump neither ended nor stopped it
    p.kill()
    out, err = p.communicate(timeout=30)
    assert out == "" and "waiting_here" not in err  # nothing of it in the workload's streams (after "ready")


@pytest.mark.parametrize("mode", ["own-handler-first", "own-handler-later"])
def test_a_program_with_its_own_sigusr2_handler_is_never_signalled(under_probe, mode):
    folder, start = under_probe
    p = start(mode)
    assert not os.path.exists(stacks_path(folder, p.pid))
    assert request_stacks(p.pid, folder, timeout=1) is None
    assert p.poll() is None
    p.kill()
    out, _ = p.communicate(timeout=30)
    assert "user handler ran" not in out


def test_no_dump_for_a_process_that_is_gone(tmp_path):
    assert request_stacks(2**22 + 5, str(tmp_path), timeout=0.5) is None
