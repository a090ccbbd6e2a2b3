"""neurondesk bootstrap: loads the probe, then hands over to the user's own sitecustomize.

This folder is put first on PYTHONPATH of the workload by `neurondesk run`. The probe stays
inert unless NEURONDESK_SOCKET is set, so a stray copy of this folder on a path does nothing.
"""

import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))

try:
    if os.environ.get("NEURONDESK_SOCKET"):
        sys.path.insert(0, _here)
        try:
            import _neurondesk_probe

            _neurondesk_probe.install()
        finally:
            sys.path.remove(_here)
except Exception as exc:  # fail open: the user's program must run whatever happens here
    # Said to the recorder, never into the workload's own streams; if even that fails, silence.
    try:
        import json
        import socket

        _msg = {"kind": "notice", "level": "warn", "source": "probe", "pid": os.getpid(),
                "message": f"probe disabled at start-up in pid {os.getpid()} ({exc!r}); this process runs unobserved"}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as _s:
            _s.settimeout(1.0)
            _s.connect(os.environ["NEURONDESK_SOCKET"])
            _s.sendall((json.dumps(_msg) + "\n").encode(), socket.MSG_NOSIGNAL)
    except Exception:  # noqa: BLE001
        pass


def _chain_user_sitecustomize() -> None:
    """Import the next `sitecustomize` on sys.path (the user's), as if we were not here."""
    saved_path = list(sys.path)
    ours = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
        importlib.import_module("sitecustomize")
    except ModuleNotFoundError as exc:
        if exc.name != "sitecustomize":
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved_path


_chain_user_sitecustomize()
