"""The metrics endpoint against slow clients (issue 53 item 14): a local user opening connections that send
a partial request and then nothing held a thread and a descriptor each, with no end (210 in 25 s). The
endpoint runs in a process of its own (the recorder's exporter, as `--metrics-addr` starts it); the test
counts that process's descriptors and threads while 200 slow clients hold their connections, scrapes it
normally meanwhile, and sees a silent connection closed by the server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest
from conftest import REPO, wait_until

from neurondesk.exporter.http_server import IO_TIMEOUT_S, MAX_CONNECTIONS

SLOW_CLIENTS = 200
SERVE = """
import time
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.exporter.endpoint import MetricsAddr, MetricsExporter
exporter = MetricsExporter(MetricsAddr("127.0.0.1", 0), job_id="j", node="n")
exporter.start()
state = RunState()
state.apply(ev.RunStarted(t=time.time(), run_id="slow-clients", command=["python", "nd-command-marker.py", "--hf-token", "x"]))
exporter.publish(state, time.time(), force=True)
print(exporter.addr.port, flush=True)
time.sleep(600)
"""


@pytest.fixture
def endpoint():
    p = subprocess.Popen([sys.executable, "-c", SERVE], stdout=subprocess.PIPE, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        port = int(p.stdout.readline())
        yield p.pid, port
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(30)


def _held(pid: int) -> tuple[int, int]:
    """(descriptors, threads) of the process."""
    return len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        return r.read().decode()


def _slow(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line that ends the request
    return s


def test_slow_clients_hold_a_bounded_number_of_descriptors_and_a_normal_scrape_is_answered(endpoint):
    pid, port = endpoint
    first = _scrape(port)
    assert 'run_id="slow-clients"' in first and "nd-command-marker" not in first  # the run, never its command line
    fds0, threads0 = _held(pid)
    clients = []
    try:
        for _ in range(SLOW_CLIENTS):
            clients.append(_slow(port))
        # every connection accepted (none left in the listen queue) before counting what it holds
        wait_until(lambda: _held(pid)[0] <= fds0 + MAX_CONNECTIONS + 4, 60,
                   "the endpoint to hold at most its cap of connections")
        fds, threads = _held(pid)
        assert fds <= fds0 + MAX_CONNECTIONS + 4 and threads <= threads0 + MAX_CONNECTIONS + 4, (fds, threads)
        assert 'run_id="slow-clients"' in _scrape(port)  # while 200 slow clients are still connected
    finally:
        for s in clients:
            s.close()


def test_a_silent_connection_is_closed_by_the_endpoint(endpoint):
    _, port = endpoint
    with _slow(port) as s:
        s.settimeout(IO_TIMEOUT_S * 6)
        assert s.recv(1024) == b""  # the server ended it (a client that never finishes its request)
