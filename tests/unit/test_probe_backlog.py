"""A process that connects to the probe socket, writes one message and exits at once (the Python 2.7
bootstrap's notice, issue 34 item 9): its message reaches the recorder before the run's end, even
when the recorder's side is slow to accept (a busy machine). Before the fix the exit waited only for
the connections already accepted; one still in the listen backlog was read after the end, or never.

The delay is put into ``socket.accept`` itself (whatever the accept loop looks like), so the
workload has exited before its connection is accepted, as on a loaded two-CPU machine."""

from __future__ import annotations

import json
import queue
import socket
import sys
import time

from neurondesk.collectors import workload as wl

SCRIPT = ("import json, os, socket\n"
          "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
          "s.connect(os.environ['NEURONDESK_SOCKET'])\n"
          "s.sendall((json.dumps({'kind': 'notice', 'level': 'warn', 'source': 'probe', 'pid': os.getpid(),\n"
          "                       'message': 'probe not loaded: the last words'}) + '\\n').encode())\n"
          "s.close()\n")
ACCEPT_DELAY_S = 0.4  # well inside the exit's one-second bound, far longer than the script lives


def test_a_message_still_in_the_backlog_at_exit_arrives_before_the_exit(tmp_path, monkeypatch) -> None:
    real_accept = socket.socket.accept

    def slow_accept(self):
        time.sleep(ACCEPT_DELAY_S)
        return real_accept(self)

    monkeypatch.setattr(socket.socket, "accept", slow_accept)
    out: queue.SimpleQueue = queue.SimpleQueue()
    w = wl.WorkloadProcess([sys.executable, "-S", "-c", SCRIPT], out, stdout_path=tmp_path / "stdout.log",
                           stderr_path=tmp_path / "stderr.log")
    w.start()
    try:
        items = []
        while not any(isinstance(x, wl.RawExit) for x in items):
            items.append(out.get(timeout=60))
    finally:
        w.cleanup()
    exit_code = next(x.code for x in items if isinstance(x, wl.RawExit))
    assert exit_code == 0, (tmp_path / "stderr.log").read_text()
    said = [json.loads(x.line)["message"] for x in items if isinstance(x, wl.RawProbe)]
    assert said == ["probe not loaded: the last words"], "the notice must be read before the exit is queued"
