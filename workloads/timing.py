"""Cheap, honest step timing and loss logging that never adds a device sync inside a step."""

from __future__ import annotations

import json
import time
from collections import deque


class StepTimer:
    """Mean wall time per steady step.

    The window opens after `warmup` steps with a full device wait, and closes after the last step
    with another, so it spans exactly the work of the timed steps even though XLA/CUDA run
    asynchronously. In between nothing waits: each step's interval is the time between consecutive
    step ends, which in steady state is the pipeline's real throughput. An interval during which a
    graph compiled (XLA compile or dynamo graph) is dropped; that also drops the part of the previous
    step's execution it overlapped, so with frequent recompiles the mean reads slightly low.
    """

    def __init__(self, backend, warmup: int = 5) -> None:
        self.backend = backend
        self.warmup = warmup
        self.total_s = 0.0
        self.steps = self.samples = self.tokens = self.skipped = 0
        self._t = self._compiles = None

    def _boundary(self) -> None:
        self.backend.sync()  # flushes a graph still pending (xla-style loader syncs lazily); else a no-op
        self.backend.wait()

    def step_done(self, step: int, samples: int, tokens: int, last: bool) -> None:
        if step < self.warmup:
            return
        if step == self.warmup or last:
            self._boundary()
        now, compiles = time.perf_counter(), self.backend.compile_count()
        if step > self.warmup and self._t is not None:
            if compiles == self._compiles:
                self.total_s += now - self._t
                self.steps += 1
                self.samples += samples
                self.tokens += tokens
            else:
                self.skipped += 1
        self._t, self._compiles = now, compiles

    def leave_out(self, seconds: float) -> None:
        """Time since the last step end that is not a step's (a checkpoint's save and read-back): the
        next interval does not count it, as a profiler of training steps would not."""
        if self._t is not None:
            self._t += seconds

    def report(self) -> dict:
        mean = self.total_s / self.steps if self.steps else None
        return {
            "steady_step_time_s": mean,
            "steps_timed": self.steps,
            "samples_per_s": self.samples / self.total_s if self.steps else None,
            "tokens_per_s": self.tokens / self.total_s if self.steps else None,
            "warmup_steps": self.warmup,
            "steps_skipped_compiled": self.skipped,
            "timed_s": self.total_s,
        }

    def print_report(self) -> None:
        print("workload-timing: " + json.dumps(self.report()), flush=True)


class LossLog:
    """Prints `step N loss X` for a loss tensor only once the device has already produced it.

    Reading a loss right after its step would wait for that step's execution (killing the overlap
    of tracing and execution) or, on XLA before the sync, run an extra graph. So a recorded loss is
    printed `lag` steps later: on XLA, step k+1's sync waits for step k's execution, so the value is
    materialised and `.item()` is a plain copy. On CUDA an event says when the copy has landed.
    """

    def __init__(self, backend, lag: int = 1) -> None:
        self.kind = backend.kind
        self.lag = lag
        self.pending: deque = deque()

    def record(self, step: int, loss) -> None:
        loss = loss.detach()
        event = None
        if self.kind == "cuda":
            import torch

            loss = loss.to("cpu", non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        self.pending.append((step, loss, event))

    def _ready(self, step: int, event, now_step: int) -> bool:
        if self.kind == "cuda":
            return event.query()
        if self.kind == "xla":
            return now_step - step >= self.lag
        return True

    def poll(self, now_step: int) -> None:
        while self.pending and self._ready(self.pending[0][0], self.pending[0][2], now_step):
            self._emit(*self.pending.popleft())

    def flush(self) -> None:
        while self.pending:
            self._emit(*self.pending.popleft())

    @staticmethod
    def _emit(step, loss, event) -> None:
        if event is not None:
            event.synchronize()
        print(f"step {step} loss {loss.float().item():.4f}", flush=True)
