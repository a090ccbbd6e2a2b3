"""Checkpoint saves and loads: torch.save / torch.load, torch.distributed.checkpoint's save,
async_save and load, Lightning's Trainer.save_checkpoint, transformers' Trainer._save_checkpoint
and _load_from_checkpoint. Each outer call is one `checkpoint` message:

    {"kind":"checkpoint","op":"save"|"load"|"async_done","api":"torch.save","duration_s":..,
     "step":<the probe's step>,"rank":..,"bytes":<size on disk, when a path was given>,"ok":true,
     "error":<"OSError: ..." when it raised>,"pending":<an async save still writing>}

Only the outermost call counts: the torch.save calls inside a DCP save, a Lightning or a Trainer
checkpoint (on its own thread, on DCP's writer threads, on async_save's background thread) are
its own time, never a second save. Sizes come from os.stat after the call (a folder: its entries'
sizes); the user's file is never opened. The call's result and its exception are the user's, unchanged:
a save that raises is sent as a failed one and the same exception goes on, its traceback without a
frame of ours (_drop_our_frame). The blocking time of a
save on the training thread is left out of the step it falls in (steps.py ``ckpt_s``): it is
checkpoint time, not training time.
"""

from __future__ import annotations

import os
import threading
import time

from . import _state


def _path_of(x) -> str | None:
    if isinstance(x, str):
        return x
    if isinstance(x, os.PathLike):
        path = os.fspath(x)
        return path if isinstance(path, str) else None
    return None


def _size(path: str | None, rank: int | None = None) -> int | None:
    """Bytes at ``path``: a file's size, or a folder's entries (a DCP folder: this rank's
    ``__<rank>_*`` files, and ``.metadata`` on rank 0). None: nothing there."""
    if path is None or "://" in path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isdir(path):
        return st.st_size
    total = 0
    with os.scandir(path) as entries:
        for entry in entries:
            name = entry.name
            if rank is not None and name.startswith("__") and not name.startswith(f"__{rank}_"):
                continue
            if rank not in (None, 0) and name == ".metadata":
                continue
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
            elif entry.is_dir(follow_symlinks=False) and rank is None:  # a Trainer's checkpoint folder: one level
                total += _size(entry.path) or 0
    return total


def _rank() -> int | None:
    return _state.env_int("RANK")


class CheckpointHooks:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.local = threading.local()  # .depth: checkpoint calls of ours on this thread
        self.lock = threading.Lock()
        self.active = 0  # outer calls in progress on any thread, and async saves still writing

    # ---------------------------------------------------------------- patches
    def patch_serialization(self, module) -> None:
        """torch.serialization: torch's own `from torch.serialization import load, save` runs after it."""
        self._patch(module, "save", "save", "torch.save", lambda a, k: _size(_path_of(_arg(a, k, 1, "f"))))
        self._patch(module, "load", "load", "torch.load", lambda a, k: _size(_path_of(_arg(a, k, 0, "f"))))

    def patch_dcp(self, module) -> None:
        """torch.distributed.checkpoint (the package: `dcp.save`; its submodules keep theirs, so
        async_save's background thread saves through torch's own function)."""
        self._patch(module, "save", "save", "dcp.save", self._dcp_bytes)
        self._patch(module, "load", "load", "dcp.load", self._dcp_bytes)
        self._patch(module, "async_save", "save", "dcp.async_save", None, is_async=True)

    def patch_lightning(self, module) -> None:
        cls = getattr(module, "Trainer", None)
        if cls is not None:
            self._patch(cls, "save_checkpoint", "save", "lightning.Trainer.save_checkpoint",
                        lambda a, k: _size(_path_of(_arg(a, k, 1, "filepath"))))

    def patch_transformers(self, module) -> None:
        cls = getattr(module, "Trainer", None)
        if cls is None:
            return
        self._patch(cls, "_save_checkpoint", "save", "transformers.Trainer._save_checkpoint", self._trainer_bytes)
        self._patch(cls, "_load_from_checkpoint", "load", "transformers.Trainer._load_from_checkpoint",
                    lambda a, k: _size(_path_of(_arg(a, k, 1, "resume_from_checkpoint"))))

    # ---------------------------------------------------------------- sizes
    @staticmethod
    def _dcp_bytes(args, kwargs) -> int | None:
        path = _path_of(kwargs.get("checkpoint_id"))
        io = kwargs.get("storage_writer", kwargs.get("storage_reader"))
        if path is None and io is not None:
            path = _path_of(getattr(io, "path", None))
        return _size(path, _rank() if "storage_reader" not in kwargs else None)

    @staticmethod
    def _trainer_bytes(args, kwargs) -> int | None:
        trainer = args[0]
        if _arg(args, kwargs, 2, "trial") is not None:
            return None
        out, step = getattr(trainer.args, "output_dir", None), getattr(trainer.state, "global_step", None)
        if not isinstance(out, str) or type(step) is not int:
            return None
        return _size(os.path.join(out, f"checkpoint-{step}"))

    # ---------------------------------------------------------------- the wrapper
    def _patch(self, owner, name: str, op: str, api: str, size, is_async: bool = False) -> None:
        real = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if not callable(real) or getattr(real, "_neurondesk", False):
            return
        hooks, probe = self, self.probe

        def call(*args, **kwargs):
            if _state.is_compiling() or probe.disabled or "checkpoint" in probe.off or not hooks.outer():
                try:
                    return real(*args, **kwargs)
                except BaseException as exc:
                    _drop_our_frame(exc)
                    raise  # a bare raise adds no frame: the user's traceback is theirs alone
            hooks.local.depth = getattr(hooks.local, "depth", 0) + 1
            with hooks.lock:
                hooks.active += 1
            step, t0 = probe.clock.step, time.perf_counter()
            try:
                result = real(*args, **kwargs)
            except BaseException as exc:
                hooks.local.depth -= 1
                probe.guarded(hooks.ended, op, api, t0, step, None, exc, False, hook="checkpoint")
                _drop_our_frame(exc)
                raise
            hooks.local.depth -= 1
            probe.guarded(hooks.ended, op, api, t0, step, (size, args, kwargs), None, is_async, hook="checkpoint")
            if is_async:  # after its own message: a future already done says so at once
                probe.guarded(hooks.watch_async, result, api, t0, step, args, kwargs, hook="checkpoint")
            return result

        setattr(owner, name, _state.dressed(call, real))

    def outer(self) -> bool:
        """A call of ours that is no other one's inner call: none on this thread, and on any other
        thread than the training one, none in progress anywhere (DCP's writer threads, an async save)."""
        if getattr(self.local, "depth", 0):
            return False
        return threading.get_ident() == self.probe.train_thread or not self.active

    def ended(self, op: str, api: str, t0: float, step: int, sized, exc, pending: bool) -> None:
        took = time.perf_counter() - t0
        if not pending:
            with self.lock:
                self.active -= 1
        clock = self.probe.clock
        if threading.get_ident() == self.probe.train_thread and clock.step_start is not None \
                and clock.step_start <= t0 and not self.probe.phase.in_eval:  # (an evaluation's time is left out whole)
            clock.ckpt_s += took  # not training time: left out of this step's duration
        size = None
        if sized is not None and sized[0] is not None and not pending:
            fn, args, kwargs = sized
            size = fn(args, kwargs)
        self.send(op, api, took, step, size, exc, pending)

    def watch_async(self, result, api: str, t0: float, step: int, args, kwargs) -> None:
        """async_save returned: its upload future says when the checkpoint is written (on its thread)."""
        future = getattr(result, "upload_completion", result)
        if not callable(getattr(future, "add_done_callback", None)):
            with self.lock:
                self.active -= 1
            return
        hooks = self

        def done(f) -> None:
            with hooks.lock:
                hooks.active -= 1
            hooks.probe.guarded(hooks.async_done, f, api, t0, step, args, kwargs, hook="checkpoint")

        future.add_done_callback(done)

    def async_done(self, future, api: str, t0: float, step: int, args, kwargs) -> None:
        exc = future.exception() if not future.cancelled() else None
        size = self._dcp_bytes(args, kwargs) if exc is None else None
        self.send("async_done", api, time.perf_counter() - t0, step, size, exc, False)

    def send(self, op: str, api: str, took: float, step: int, size, exc, pending: bool) -> None:
        msg = {"kind": "checkpoint", "op": op, "api": api, "duration_s": max(0.0, took), "step": step,
               "rank": _rank(), "bytes": size, "ok": exc is None}
        if exc is not None:
            try:
                msg["error"] = f"{type(exc).__name__}: {exc}"[:500]
            except Exception:  # noqa: BLE001 - an exception whose str() raises
                msg["error"] = type(exc).__name__
        if pending:
            msg["pending"] = True
        self.probe.send(msg)


def _drop_our_frame(exc: BaseException) -> None:
    """Take this module's frame off the head of the exception's traceback: re-raised with a bare
    ``raise`` (which adds none), the user's uncaught traceback is what it is without neurondesk."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_globals is globals():
        tb = tb.tb_next
    exc.__traceback__ = tb


def _arg(args, kwargs, i: int, name: str):
    if name in kwargs:
        return kwargs[name]
    return args[i] if len(args) > i else None
