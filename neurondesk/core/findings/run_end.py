"""How a run ended, or its first failure while it goes on: one rule for the node's Prometheus series
(exporter/job.py) and the job summary (core/job/job_summary.py). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.reduce.state import RunState


@dataclass(frozen=True)
class RunEnd:
    failed_rank: int | None  # the rank that failed first, where known
    failed_t: float | None  # the run's clock plus ``offset``
    what: str  # "RuntimeError: ...", "exit 1", "SIGKILL"
    last_line: str  # its last stderr line ('' if none)
    step: int | None


def first_failure(state: RunState, offset: float = 0.0) -> RunEnd | None:
    """The rank that failed first (the others died of the teardown that followed), else a finished run's
    non-zero exit or signal; None for a run going well or ended well."""
    tail = [line for line in state.stderr_tail if line.strip()]
    last = tail[-1][:200] if tail else ""
    first = state.parts.ranks.failed_first
    if first is not None:
        return RunEnd(first.rank, first.t + offset, first.error[:200], last, first.step)
    if state.finished and (state.exit_code not in (0, None) or state.exit_signal):
        what = state.exit_signal or f"exit {state.exit_code}"
        end = state.parts.run.finished_t
        return RunEnd(None, None if end is None else end + offset, what, last, state.steps_done)
    return None
