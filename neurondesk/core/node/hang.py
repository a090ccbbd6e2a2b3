"""The hang rule: a job that stopped stepping while nothing compiles. Pure: the caller gives "now".

A run is *hung* when no progress was seen for longer than its threshold while no compile is in
progress (a compile wall is not a hang, however long). Progress is the end of the lead's latest
training step, of the latest compile, or of the latest evaluation phase, and the progress of any
phase still open: an evaluation's forwards (the probe's EvalProgress, at most a second apart) or a
progress line the workload printed (its own bar, ThroughputReported); before the first step
nothing is called a hang (start-up and the first compile have no step to measure from).

Threshold: ``--hang-after S`` when given, else max(10 x the steady median step time, 5 min).
A finished run is never hung. The phase text, the notice and the alert all read ``detect_hang``.
It reads a typed ``Progress`` (built by core/reduce/state.py's ``RunState.progress()``), never the reducers:
node is below reduce in core's wings.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.node.disk import duration_words

HANG_MIN_S = 300.0  # never called hung before 5 minutes without progress
HANG_STEPS = 10  # ... nor before 10 steady median step times


@dataclass(frozen=True)
class Hang:
    step: int  # the step the job stands at (steps done: the next one never ended)
    since_t: float  # the last progress seen
    idle_s: float  # now - since_t
    threshold_s: float

    def words(self) -> str:
        return f"hung at step {self.step:,} for {seconds_words(self.idle_s)}"


def seconds_words(seconds: float) -> str:
    """"42 s" under a minute, else duration_words ("1 h 5 min")."""
    return f"{seconds:.0f} s" if seconds < 60 else duration_words(seconds)


def hang_threshold_s(steady_median_s: float | None, hang_after_s: float | None) -> float:
    """``--hang-after`` when set; else max(10 x steady median step time, 5 min)."""
    if hang_after_s is not None:
        return hang_after_s
    return max(HANG_STEPS * (steady_median_s or 0.0), HANG_MIN_S)


@dataclass(frozen=True)
class Progress:
    """What the hang rule reads of a run, copied out of the reducers."""

    finished: bool
    compiling: bool  # a compile is open
    last_step_end: float | None  # the lead's latest step's end (None: no step yet)
    other_marks: tuple[float, ...]  # the latest compile's end, evaluation's end, evaluation or printed progress
    steady_step_time_s: float | None
    hang_after_s: float | None  # --hang-after
    steps_done: int


def last_progress_t(p: Progress) -> float | None:
    """The latest sign that the job moves: a step ended, a compile ended, an evaluation ended or
    went on, the workload printed progress."""
    if p.last_step_end is None:  # no step yet: nothing to measure a hang from
        return None
    return max((p.last_step_end, *p.other_marks))


def detect_hang(p: Progress, now: float | None) -> Hang | None:
    """The hang at ``now``, or None (finished, compiling, no step yet, or progress recent enough)."""
    if now is None or p.finished or p.compiling:
        return None
    since = last_progress_t(p)
    if since is None:
        return None
    threshold = hang_threshold_s(p.steady_step_time_s, p.hang_after_s)
    idle = now - since
    if idle < threshold:
        return None
    return Hang(step=p.steps_done, since_t=since, idle_s=idle, threshold_s=threshold)


@dataclass
class HangWatch:
    """Episodes for the recorder: ``check`` answers a Hang once when one starts and the seconds it
    lasted once when progress resumes (the notice and the alert say each once, not every poll)."""

    hung: Hang | None = None

    def check(self, p: Progress, now: float) -> tuple[str, Hang | float] | None:
        hang = detect_hang(p, now)
        if hang is not None and self.hung is None:
            self.hung = hang
            return "hung", hang
        if hang is None and self.hung is not None:
            was, self.hung = self.hung, None
            since = last_progress_t(p)
            if not p.finished and since is not None and since > was.since_t:
                return "resumed", since - was.since_t
        return None
