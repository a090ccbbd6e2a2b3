"""Loss values the workload printed, and when (steps and wall time) it reached the target."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from neurondesk.core import events as ev
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import HISTORY, StepReducer


class LossReducer:
    def __init__(self, run: RunReducer, steps: StepReducer) -> None:
        self._run = run
        self._steps = steps
        self.loss_first: float | None = None
        self.loss_last: float | None = None
        self.loss_history: deque[tuple[int, float]] = deque(maxlen=HISTORY)
        self.steps_to_target: int | None = None
        self.time_to_target_s: float | None = None  # wall seconds from the run's start to that loss line
        self.loss_nonfinite = 0  # nan / inf losses seen

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"loss": self.on_loss}

    def on_loss(self, e: ev.LossReported) -> None:
        step = e.step if e.step is not None else self._steps.steps_done
        if self.loss_first is None:
            self.loss_first = e.value
        self.loss_last = e.value
        self.loss_history.append((step, e.value))
        finite = math.isfinite(e.value)
        if not finite:
            self.loss_nonfinite += 1
        target, started = self._run.target_loss, self._run.started_t
        if self.steps_to_target is None and target is not None and finite and e.value <= target:
            self.steps_to_target = step
            self.time_to_target_s = max(0.0, e.t - started) if started is not None else None
