"""The recorder's control socket: how a viewer asks the recorder to signal, stop or export.

One JSON line in, one JSON line out: ``{"op": "signal", "sig": "SIGINT"}`` -> ``{"ok": true,
"message": "..."}``. The server only queues the request for the recorder's own loop (which owns
the run's state) and waits for its answer; it never touches the run itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from dataclasses import dataclass, field

OPS = ("signal", "stop", "export")
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")
REPLY_TIMEOUT_S = 10.0


@dataclass
class ControlRequest:
    """Queued for the recorder's loop; ``answer()`` wakes the waiting connection."""

    op: str
    args: dict
    reply: dict = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    def answer(self, ok: bool, message: str) -> None:
        self.reply = {"ok": ok, "message": message}
        self.done.set()


class ControlServer:
    def __init__(self, path: str, put) -> None:
        self.path = path
        self.put = put  # the recorder's queue.put
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o600)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, name="nd-control", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), name="nd-control-conn", daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(REPLY_TIMEOUT_S)
            try:
                line = conn.makefile("rb").readline(4096)
                msg = json.loads(line)
                op = msg.get("op") if isinstance(msg, dict) else None
                if op not in OPS:
                    reply = {"ok": False, "message": f"unknown request {op!r}; expected one of {', '.join(OPS)}"}
                else:
                    req = ControlRequest(op, {k: v for k, v in msg.items() if k != "op"})
                    self.put(req)
                    ok = req.done.wait(REPLY_TIMEOUT_S)
                    reply = req.reply if ok else {"ok": False, "message": "the recorder did not answer in time"}
                conn.sendall((json.dumps(reply) + "\n").encode())
            except (OSError, ValueError):
                return  # a viewer that went away or sent garbage: nothing to do

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def answer_workload_request(req: ControlRequest, workload) -> None:
    """A viewer's stop or signal, passed to the workload (None, or not running: it has exited)."""
    if workload is None or not workload.running():
        req.answer(False, "the workload has already exited")
    elif req.op == "stop":
        workload.stop()
        req.answer(True, "stopping the workload: SIGINT now, SIGTERM after 10 s, SIGKILL 5 s later")
    elif req.args.get("sig") in SIGNALS:
        workload.signal(getattr(signal, req.args["sig"]))
        req.answer(True, f"{req.args['sig']} sent to the workload")
    else:
        req.answer(False, f"cannot send {req.args.get('sig')!r}; expected one of {', '.join(SIGNALS)}")
