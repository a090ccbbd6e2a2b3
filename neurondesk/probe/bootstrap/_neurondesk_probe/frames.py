"""Where in the user's code something happened: the innermost frame that is theirs (not torch,
not a framework that runs their loop, not the probe itself), read from the stack."""

from __future__ import annotations

import os
import sys
import threading

PROBE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # every frame of the probe is in here
_LIB_MARKERS = (os.sep + "torch" + os.sep, os.sep + "torch_xla" + os.sep, "site-packages", "dist-packages")
_STDLIB = os.path.dirname(os.__file__) + os.sep  # contextlib, functools ... are not the user's code
# Frameworks that run the user's loop: their frames are never the user's line, wherever they are
# installed (a source checkout is not in site-packages); the innermost one is named beside it.
_FRAMEWORKS = frozenset({"transformers", "accelerate", "lightning", "pytorch_lightning", "lightning_fabric",
                         "deepspeed", "optimum", "peft", "trl", "neuronx_distributed", "torch_neuronx"})


def framework_of(f) -> str | None:
    name = f.f_globals.get("__name__")
    if type(name) is not str:
        return None
    top = name.partition(".")[0]
    return top if top in _FRAMEWORKS else None


def _is_users(f, fn: str) -> bool:
    return (not fn.startswith(("<", _STDLIB, PROBE_DIR)) and not any(m in fn for m in _LIB_MARKERS)
            and framework_of(f) is None)


def user_frame(f) -> str | None:
    while f is not None:
        fn = f.f_code.co_filename
        if _is_users(f, fn):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return None


def user_location() -> str | None:
    """file:line of the innermost frame that is the user's code (not torch, not us). A thread
    with no user frame of its own (autograd runs an XLA or CUDA backward, and compiles it, on a
    device thread) gets where the main thread stands: the user's ``loss.backward()``."""
    found = user_frame(sys._getframe(1))
    if found is None and threading.current_thread() is not threading.main_thread():
        try:
            found = user_frame(sys._current_frames().get(threading.main_thread().ident))
        except Exception:  # noqa: BLE001 - a location is a nicety; never an error in user code
            found = None
    return found


def _named(f, pkg: str | None = None) -> str:
    code = f.f_code
    where = getattr(code, "co_qualname", code.co_name)
    return f"{pkg + ' ' if pkg else ''}{where} at {os.path.basename(code.co_filename)}:{f.f_lineno}"


def library_location() -> str | None:
    """The innermost frame of a framework that runs the user's loop (Trainer, Lightning ...):
    'transformers Trainer.evaluation_loop at trainer.py:4675'. Only at a compile or a graph run
    inside the step, never per step."""
    return library_frames()[0]


def library_frames() -> tuple[str | None, str | None]:
    """The innermost framework frame, and its caller in the library: the first frame of another
    framework ('transformers Trainer._get_num_items_in_batch at trainer.py:5626' for accelerate's
    gather), else of another file ('GPT2Model.forward at modeling_gpt2.py:873' for a read in
    masking_utils.py): where the cause is, and what of the library the user's arguments reach."""
    try:
        f = sys._getframe(1)
        while f is not None and framework_of(f) is None:
            f = f.f_back
        if f is None:
            return None, None
        pkg, file = framework_of(f), f.f_code.co_filename
        inner, other_file, f = _named(f, pkg), None, f.f_back
        while f is not None and not _is_users(f, f.f_code.co_filename):
            other = framework_of(f)
            if other is not None and other != pkg:
                return inner, _named(f, other)
            if other is not None and other_file is None and f.f_code.co_filename != file:
                other_file = _named(f)
            f = f.f_back
        return inner, other_file
    except Exception:  # noqa: BLE001 - a nicety
        return None, None


def sync_point() -> str:
    """The call path from the sync up to the user's frame: two syncs reached from the same user
    line through different library lines (torch_xla.compile's entry and exit) differ."""
    parts = []
    f = sys._getframe(1)
    while f is not None and len(parts) < 12:
        fn = f.f_code.co_filename
        if not fn.startswith(PROBE_DIR):
            parts.append(f"{os.path.basename(fn)}:{f.f_lineno}")
            if _is_users(f, fn):
                break
        f = f.f_back
    return ">".join(parts)
