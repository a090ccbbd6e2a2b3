"""The events of a job's attempts (core/reduce/attempts.py): where a restarted process's step count begins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from neurondesk.core.events.run_events import Event


@dataclass(frozen=True)
class StepResumed(Event):
    """Process ``pid`` began at a step other than 0: its optimizer's own step count was already
    ``step`` at its first step (a checkpoint restored it). Its step 0 is the job's step ``step``."""

    kind: ClassVar[str] = "step_resumed"
    pid: int
    step: int  # optimizer steps already done when the process's first step began
    source: str = "optimizer state"
