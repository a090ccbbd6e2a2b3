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
    sys.stderr.write(f"neurondesk: probe disabled at start-up ({exc!r}); the workload runs unobserved\n")


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
