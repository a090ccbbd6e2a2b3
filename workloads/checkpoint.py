"""Checkpoints as ordinary scripts write them (pytorch/examples' word_language_model saves its best
model with `torch.save(model, f)`): the whole model, the optimizer and an EMA copy made with
`copy.deepcopy`, pickled whole, then read back. Under neurondesk this must work exactly as alone.

On XLA each piece of work is cut into a graph of its own, at a line of its own (the step's pending
graph first, as checkpoint code does with `xm.mark_step()` before saving; then the copy; then the
EMA update), so the training step's graph never changes and each small graph compiles once.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time

import torch


class Checkpointer:
    def __init__(self, every: int, folder: str | None, backend, rank: int) -> None:
        self.every = every
        self.xla = backend.torch_xla if backend.kind == "xla" else None
        self.enabled = every > 0 and rank == 0  # as real scripts do: rank 0 saves for the job
        self.own_folder = folder is None
        self.folder = folder or (tempfile.mkdtemp(prefix="train-ckpt-") if self.enabled else None)
        self.ema: torch.nn.Module | None = None
        self.saved = 0

    def maybe_save(self, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer) -> float:
        """Saves every `every` steps; returns the seconds of the save and its read-back (0.0: none)."""
        if not self.enabled or step % self.every:
            return 0.0
        if self.xla:
            self.xla.sync()  # the step's pending work (a loader-style loop cuts it later)
        module = getattr(model, "module", model)  # a DDP wrapper saves its module, as scripts do
        if self.ema is None:
            self.ema = copy.deepcopy(module)  # the EMA weights start as a deep copy, at the first save
            if self.xla:
                self.xla.sync()
        with torch.no_grad():  # the same small graph at every save: compiled once
            for e, p in zip(self.ema.parameters(), module.parameters(), strict=True):
                e.lerp_(p, 0.1)
        if self.xla:
            self.xla.sync()
        os.makedirs(self.folder, exist_ok=True)
        path = os.path.join(self.folder, "last.pt")
        t0 = time.perf_counter()
        torch.save({"model": module, "optimizer": opt, "ema": self.ema, "step": step}, path)
        back = torch.load(path, weights_only=False)
        took = time.perf_counter() - t0
        assert back["step"] == step and type(back["model"]) is type(module)
        self.saved += 1
        print(f"checkpoint: step {step} saved and read back ({os.path.getsize(path)} bytes, "
              f"model + optimizer + EMA deepcopy)", flush=True)
        return took

    def close(self) -> None:
        if self.own_folder and self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
