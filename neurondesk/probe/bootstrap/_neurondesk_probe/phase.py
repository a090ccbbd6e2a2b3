"""Evaluation phases: forwards under no_grad / inference_mode / module.eval() in a script with an
optimizer. Their time, batches and compiles are their own, never the training step's."""

from __future__ import annotations

import time

from .shapes import dims_of

PROGRESS_EVERY_S = 1.0  # an open evaluation says it goes on at most this often (core/node/hang.py: not a hang)


class EvalPhase:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.in_eval = False
        self.grad_modes = None  # (torch.is_grad_enabled, torch.is_inference_mode_enabled), once torch is in
        self.eval_start = 0.0
        self.progress_at = 0.0  # the last EvalProgress sent (or the phase's start)
        self.eval_batches = self.eval_samples = self.eval_tokens = 0
        self.eval_compiles = self.eval_execs = 0
        self.eval_wait = 0.0
        self.eval_dims: list[int] | None = None

    def is_eval_forward(self, mod) -> bool:
        """A forward that is not training: in a script that has an optimizer, one run without
        grad (no_grad, inference_mode) or on a module in eval mode."""
        clock = self.probe.clock
        if not (clock.has_optimizer or clock.backward_seen):
            return False  # an inference script: its forwards are its steps
        if self.grad_modes is None:  # looked up once, not at every forward
            import torch

            self.grad_modes = (torch.is_grad_enabled, torch.is_inference_mode_enabled)
        grad_enabled, inference_mode = self.grad_modes
        if not grad_enabled() or inference_mode():
            return True
        return getattr(mod, "training", True) is False

    def enter(self) -> None:
        """An evaluation forward: the phase begins, or goes on (said at most once a second)."""
        if not self.in_eval:
            self.in_eval = True
            self.eval_start = self.progress_at = time.perf_counter()
            self.eval_batches = self.eval_samples = self.eval_tokens = 0
            self.eval_compiles = self.eval_execs = 0
            self.eval_wait = 0.0
            return
        now = time.perf_counter()
        if now - self.progress_at >= PROGRESS_EVERY_S:
            self.progress_at = now
            self.probe.send({"kind": "eval_progress", "step": self.probe.clock.step, "batches": self.eval_batches,
                             "duration_s": now - self.eval_start})

    def leave(self) -> None:
        """Training is back (a training forward or an optimizer step): the evaluation phase ends."""
        if not self.in_eval:
            return
        now = time.perf_counter()
        self.in_eval = False
        clock = self.probe.clock
        clock.eval_s_in_step += now - self.eval_start
        self.probe.send({"kind": "eval_phase", "step": clock.step, "duration_s": now - self.eval_start,
                         "batches": self.eval_batches, "samples": self.eval_samples, "tokens": self.eval_tokens,
                         "data_wait_s": self.eval_wait, "compiles": self.eval_compiles,
                         "executions": self.eval_execs})

    def new_pass(self) -> None:
        """A new pass over a data loader while an evaluation is open is a new evaluation (Trainer's
        evaluation at step 60 and its final evaluate(); Lightning's validation, test, predict):
        back-to-back, they are phases of their own, not one."""
        if self.in_eval and self.eval_batches:
            self.leave()

    @property
    def name(self) -> str:
        return "eval" if self.in_eval else "train"

    def count_compiles(self, n: int) -> None:
        """Compiles belong to the phase they happen in: an evaluation's never mark a training step."""
        if self.in_eval:
            self.eval_compiles += n
        else:
            self.probe.clock.step_compiles += n

    def shapes(self) -> list[list[int]] | None:
        """The input shape of the last forward of the phase that compiles: the graph's inputs,
        not every batch the step has seen (an evaluation loop inside a step is not a new shape)."""
        clock = self.probe.clock
        if not self.in_eval and clock.running_args:  # inside a training forward: its own input, not the last one's
            for a in clock.running_args:
                dims = dims_of(a)
                if dims is not None:
                    return [dims]
        dims = self.eval_dims if self.in_eval else clock.train_dims
        return [dims] if dims else None
