"""The recorder's end of a real probe's Unix socket, for tests that drive a `Probe` directly."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

BOOTSTRAP = Path(__file__).resolve().parent.parent / "neurondesk" / "probe" / "bootstrap"


def load_probe_module():
    """The one-file probe the bootstrap loads into the user's process."""
    sys.path.insert(0, str(BOOTSTRAP))
    try:
        import _neurondesk_probe
    finally:
        sys.path.remove(str(BOOTSTRAP))
    return _neurondesk_probe


class SocketReader:
    """The recorder's end of the probe's socket: keeps every line."""

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="nd-ps-"), "p.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.lines: list[bytes] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        conn, _ = self.server.accept()
        with conn, conn.makefile("rb") as f:
            self.lines.extend(f)

    def close(self, probe) -> list[bytes]:
        """Flush the probe, close its end, and give every line it sent."""
        probe.flush_at_exit()
        if probe.transport.sock is not None:
            probe.transport.sock.close()
        probe.disabled = True  # its flusher thread ends
        self.thread.join(30)
        self.server.close()
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)
        return self.lines
