"""neurondesk bootstrap: loads the probe, then hands over to the user's own sitecustomize.

This folder is put first on PYTHONPATH of the workload by `neurondesk run`. The probe stays
inert unless NEURONDESK_SOCKET is set, so a stray copy of this folder on a path does nothing.

Whatever interpreter the user brings runs this file (a trn1 image's old Python, TorchNeuron's
3.12-3.14, a Python 2 helper script): it parses and runs in all of them (no f-strings, no names
newer than Python 2.7 outside a guard), and where the probe cannot run (before Python 3.7) it says
so once to the recorder and the program runs unobserved.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_OLDEST = (3, 7)  # the probe module's own syntax (from __future__ import annotations)


def _tell_recorder(message):
    """One notice over the probe's socket; never into the workload's streams; silent on failure."""
    try:
        import json
        import socket

        msg = {"kind": "notice", "level": "warn", "source": "probe", "pid": os.getpid(), "message": message}
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(1.0)
            s.connect(os.environ["NEURONDESK_SOCKET"])
            s.sendall((json.dumps(msg) + "\n").encode("utf-8"), getattr(socket, "MSG_NOSIGNAL", 0))
        finally:
            s.close()
    except Exception:  # noqa: BLE001
        pass


def _load_probe():
    if sys.version_info[:2] < _OLDEST:
        _tell_recorder("probe not loaded in pid %d: Python %d.%d is older than %d.%d, the oldest it runs in; "
                       "this process runs unobserved (%s)"
                       % ((os.getpid(),) + tuple(sys.version_info[:2]) + _OLDEST + (sys.executable,)))
        return
    sys.path.insert(0, _here)
    try:
        import _neurondesk_probe

        _neurondesk_probe.install()
    finally:
        sys.path.remove(_here)


try:
    if os.environ.get("NEURONDESK_SOCKET"):
        _load_probe()
except Exception as exc:  # fail open: the user's program must run whatever happens here
    _tell_recorder("probe disabled at start-up in pid %d (%r); this process runs unobserved" % (os.getpid(), exc))


def _chain_user_sitecustomize():
    """Import the next `sitecustomize` on sys.path (the user's), as if we were not here."""
    import importlib

    saved_path = list(sys.path)
    ours = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
        importlib.import_module("sitecustomize")
    except ImportError as exc:
        # Only "there is none" is swallowed; an ImportError inside the user's module is theirs.
        missing = getattr(exc, "name", None) == "sitecustomize" or str(exc) == "No module named sitecustomize"
        if not missing:
            raise
        if ours is not None:
            sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved_path


_chain_user_sitecustomize()
