"""A viewer's side of the recorder's control socket (recorder/control.py): one request, one answer."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from neurondesk.recorder.control import REPLY_TIMEOUT_S
from neurondesk.store.liveness import read_recorder_info, recorder_alive
from neurondesk.store.rundir import RunPaths


class ControlError(RuntimeError):
    """The recorder could not be reached; the message says why and what to do."""


def request(run_dir: Path | str, op: str, **args) -> str:
    """Ask the recorder of ``run_dir``; returns its answer's message, raises ControlError."""
    if not recorder_alive(run_dir):
        raise ControlError(f"no recorder runs for {run_dir}: the run has ended, or its recorder was killed")
    info = read_recorder_info(run_dir)
    if info is None:
        raise ControlError(f"{RunPaths(run_dir).recorder_info} is missing or unreadable; the recorder cannot be reached")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(REPLY_TIMEOUT_S + 2)
            s.connect(info.control_socket)
            s.sendall((json.dumps({"op": op, **args}) + "\n").encode())
            reply = json.loads(s.makefile("rb").readline(65536) or b"{}")
    except (OSError, ValueError) as exc:
        raise ControlError(f"cannot reach the recorder of {run_dir} ({exc})") from exc
    if not reply.get("ok"):
        raise ControlError(reply.get("message") or "the recorder refused the request")
    return str(reply.get("message", ""))
