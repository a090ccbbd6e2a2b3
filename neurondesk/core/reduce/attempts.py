"""The attempts of a job: a run folder holds every attempt (torchrun's restarts, a requeued SLURM job), each
a set of ranks that keep their global rank; what each attempt reached, where the next one resumed, and the
failure that ended it (a disruption, kept with its cause, step, rank and traceback).

Which attempt a process is: ``TORCHELASTIC_RESTART_COUNT`` (torchrun sets it in each worker) or
``SLURM_RESTART_COUNT`` from its hello; without either, a process that declares a rank the current
attempt already holds, after a failure in it, starts the next attempt. So does one that says the current
attempt's count for a rank it holds, not as a child of the rank's process, after a failure in the attempt
or from the same parent (the launcher started the rank again): torchrun restarts a node's workers without counting it when another
node re-joins the rendezvous (many nodes: the node that failed counts its restart, this one may not),
and the attempts after it are numbered on from there.

Steps: the probe counts a process's steps from 0. A restarted process that resumed from a checkpoint says
where (``StepResumed``: its optimizer's own step count at its first step), so its step ``s`` is the job's
step ``resumed + s``; without it the attempt is taken to have started over (the figures say which).
An attempt *reached* its resumed step plus the most steps any of its ranks ended; the next attempt's
resumed step below that is progress lost (run twice).

Bounded: the last ``KEEP`` attempts are kept; an older one is dropped and leaves the figures of the restart
that ended it in ``folded`` (the summary lists the kept ones and counts all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import add, sub

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.attempt_events import StepResumed
from neurondesk.core.events.job_identity import whole_number
from neurondesk.core.node.failure_cause import first_cause

KEEP = 32  # attempts kept in full (the last ones)
FAILURES_KEPT = 8  # failure events kept per attempt (the others are consequences or repeats)
TRACEBACK_LINES = 30
RESTART_VARS = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")


@dataclass(frozen=True)
class AttemptFailure:
    t: float
    pid: int | None
    rank: int | None
    error: str
    step: int | None  # the probe's step of that process (0-based: the steps it had ended)
    traceback: tuple[str, ...] = ()


@dataclass
class Attempt:
    number: int  # 0 for the first launch; the launcher's restart count where it says it
    started_t: float
    ranks: dict[int, int] = field(default_factory=dict)  # global rank -> pid
    parents: dict[int, int] = field(default_factory=dict)  # global rank -> its pid's parent (0: not said)
    steps: dict[int, int] = field(default_factory=dict)  # pid -> steps it ended (the probe's count)
    resumed: int | None = None  # the job step its step 0 is (StepResumed); None: not said
    first_step_start: float | None = None
    last_step_end: float | None = None
    lead_pid: int | None = None  # its first stepping process: its step seconds price the steps lost
    lead_step_s: float = 0.0
    lead_steps: int = 0
    failures: list[AttemptFailure] = field(default_factory=list)

    @property
    def start_step(self) -> int:
        return self.resumed or 0

    @property
    def reached(self) -> int:
        """The largest job step it reached."""
        return self.start_step + max(self.steps.values(), default=0)

    @property
    def failure(self) -> AttemptFailure | None:
        return first_cause(self.failures, lambda f: f.t, lambda f: f.error)

    @property
    def ended_t(self) -> float | None:
        """When it failed (its first failure), else its last step's end."""
        f = self.failures and min(f.t for f in self.failures)
        return f or self.last_step_end

    @property
    def mean_step_s(self) -> float | None:
        return self.lead_step_s / self.lead_steps if self.lead_steps else None


@dataclass(frozen=True)
class Lost:
    """What one disruption cost: the steps run twice, their seconds, and the time to the next attempt's first step."""

    steps: int
    seconds: float
    recovery_s: float
    problem: str | None = None  # a resumed step that makes no sense, in words


@dataclass
class Folded:
    """The figures of disruptions whose attempts were dropped (KEEP)."""

    attempts: int = 0
    max_reached: int = 0
    first_start_step: int | None = None  # where the first attempt began
    steps_lost: int = 0
    wasted_s: float = 0.0
    recovery_s: float = 0.0


def lost_between(before: Attempt, after: Attempt) -> Lost:
    """What the restart from ``before`` to ``after`` cost."""
    problem = None
    lost = before.reached - after.start_step
    if lost < 0:
        problem = (f"attempt {after.number} resumed at step {after.start_step}, past the step {before.reached} "
                   f"attempt {before.number} reached: steps lost counted 0")
        lost = 0
    elif after.resumed is not None and after.resumed < before.start_step:
        problem = (f"attempt {after.number} resumed at step {after.resumed}, below the step {before.start_step} "
                   f"attempt {before.number} had resumed from: an older checkpoint was loaded")
    mean = before.mean_step_s
    seconds = lost * mean if mean is not None else 0.0
    end, start = before.ended_t, after.first_step_start
    recovery = max(0.0, start - end) if end is not None and start is not None else 0.0
    return Lost(lost, seconds, recovery, problem)


class AttemptReducer:
    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.pid_attempt: dict[int, int] = {}  # pid -> attempt number (processes of kept attempts)
        self.folded = Folded()
        self.base: int | None = None  # the recorder's own SLURM_RESTART_COUNT (a requeued job's launch)
        self.problems: list[str] = []
        self.uncounted = 0  # restarts the launcher did not count (added to the counts processes say)

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"run_started": self.on_run_started, "process_attached": self.on_process_attached,
                "step_resumed": self.on_step_resumed, "step": self.on_step, "steps": self.on_steps,
                "probe_dropped": self.on_probe_dropped, "process_failed": self.on_process_failed,
                "rank_exited": self.on_rank_exited}

    # ------------------------------------------------------------------ which attempt
    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def number(self) -> int:
        return self.current.number if self.current else (self.base or 0)

    def attempt_of(self, pid: int | None) -> int:
        """The attempt a process belongs to (the current one for a process never seen)."""
        return self.pid_attempt.get(pid, self.number) if pid is not None else self.number

    def is_old(self, pid: int) -> bool:
        """A process of an attempt before the current one."""
        a = self.pid_attempt.get(pid)
        return a is not None and a < self.number

    def on_run_started(self, e: ev.RunStarted) -> None:
        self.base = self._count(e.launch_env)

    def on_process_attached(self, e: ev.ProcessAttached) -> None:
        said = self._count(e.launch_env)
        cur = self.current
        held = cur is not None and e.rank is not None and cur.ranks.get(e.rank, e.pid) != e.pid
        if said is None:
            # no restart count: a rank seen again in an attempt that failed is its next attempt
            said = cur.number + 1 if held and cur.failures else self.number
        elif (cur is not None and said + self.uncounted == cur.number and held and e.ppid != cur.ranks[e.rank]
              and (cur.failures or 0 != e.ppid == cur.parents.get(e.rank))):  # not the rank's DataLoader worker
            self.uncounted += 1  # the launcher started the rank again without counting it (module docstring)
            said += self.uncounted
        else:
            said += self.uncounted
        if cur is None or said > cur.number:
            self._start(said, e.t)
        elif said < cur.number:
            self._problem(f"process {e.pid} says it is attempt {said}, after attempt {cur.number} began: "
                          f"counted in attempt {cur.number}")
        number = self.current.number
        self.pid_attempt[e.pid] = number
        if e.rank is not None and e.rank not in self.current.ranks:  # the first to say it (a DataLoader
            self.current.ranks[e.rank] = e.pid  # worker inherits its rank's RANK)
            self.current.parents[e.rank] = e.ppid

    def _start(self, number: int, t: float) -> None:
        self.attempts.append(Attempt(number=number, started_t=t))
        if len(self.attempts) > KEEP:  # fold the oldest
            gone, nxt = self.attempts[0], self.attempts[1]
            lost = lost_between(gone, nxt)
            f = self.folded
            if f.first_start_step is None:
                f.first_start_step = gone.start_step
            f.attempts += 1
            f.max_reached = max(f.max_reached, gone.reached)
            f.steps_lost += lost.steps
            f.wasted_s += lost.seconds
            f.recovery_s += lost.recovery_s
            del self.attempts[0]
            kept = {a.number for a in self.attempts}
            self.pid_attempt = {p: a for p, a in self.pid_attempt.items() if a in kept}

    def job_step(self, pid: int | None, step: int | None) -> int | None:
        """A process's step count as the job's step: its attempt's resumed step plus it (0: not said)."""
        a = self._attempt(pid)
        return None if step is None else step + ((a.resumed or 0) if a is not None else 0)

    def _attempt(self, pid: int | None) -> Attempt | None:
        number = self.attempt_of(pid)
        for a in reversed(self.attempts):
            if a.number == number:
                return a
        return None

    def _problem(self, words: str) -> None:
        if len(self.problems) < 8 and words not in self.problems:
            self.problems.append(words)

    def _count(self, env: dict[str, str]) -> int | None:
        """The launcher's restart count; one that is not a whole number is refused in one line (and the
        attempt is told as without a count)."""
        for name in RESTART_VARS:
            text = env.get(name)
            if text is None:
                continue
            count = whole_number(text)
            if count is not None:
                return count
            self._problem(f"{name}={text[:20]!r} is not a whole number (digits 0-9, at most 7): "
                          f"the restart count ignored; check what sets it")
        return None

    # ------------------------------------------------------------------ steps
    def on_step_resumed(self, e: StepResumed) -> None:
        a = self._attempt(e.pid)
        if a is not None and (a.resumed is None or e.step > a.resumed):
            a.resumed = e.step

    def _stepped(self, pid: int, ended: int, first: float, start: float, end: float,
                 seconds: Sequence[float]) -> Attempt | None:
        """``first``: its first step's start; ``start``: the earliest step start; ``end``: the latest end."""
        a = self._attempt(pid)
        if a is None:  # steps before any hello (a process the probe never introduced): the first attempt
            self._start(self.number, first)
            a = self.current
            self.pid_attempt[pid] = a.number
        if ended > a.steps.get(pid, 0):
            a.steps[pid] = ended
        if a.first_step_start is None or start < a.first_step_start:
            a.first_step_start = start
        if a.last_step_end is None or end > a.last_step_end:
            a.last_step_end = end
        if a.lead_pid is None:
            a.lead_pid = pid
        if a.lead_pid == pid:  # added one by one, in order: a batch sums as its steps do
            a.lead_step_s = reduce(add, seconds, a.lead_step_s)
            a.lead_steps += len(seconds)
        return a

    def on_step(self, e: ev.StepEnded) -> None:
        start = e.t - e.duration_s - e.eval_s
        self._stepped(e.pid, e.step + 1, start, start, e.t, (e.duration_s,))

    def on_steps(self, b: ev.StepBatch) -> None:
        n = len(b)
        if n:
            self._stepped(b.pid, b.step + n, b.ts[0] - b.duration_s[0], min(map(sub, b.ts, b.duration_s)), max(b.ts),
                          b.duration_s)

    def on_probe_dropped(self, e: ev.ProbeDropped) -> None:
        a = self._attempt(e.pid)
        if a is not None and e.steps > a.steps.get(e.pid, 0):
            a.steps[e.pid] = e.steps  # steps it ended that never arrived (it died with them)

    # ------------------------------------------------------------------ failures
    def _failed(self, pid: int | None, f: AttemptFailure) -> None:
        a = self._attempt(pid)
        if a is not None and len(a.failures) < FAILURES_KEPT:
            a.failures.append(f)

    def on_process_failed(self, e: ev.ProcessFailed) -> None:
        a = self._attempt(e.pid)
        rank = next((r for r, p in a.ranks.items() if p == e.pid), None) if a else None
        self._failed(e.pid, AttemptFailure(e.t, e.pid, rank, e.error[:300], e.step,
                                           tuple(e.traceback[-TRACEBACK_LINES:])))

    def on_rank_exited(self, e: ev.RankExited) -> None:
        if not e.root_cause:
            return
        a = self._attempt(e.pid)
        rank = next((r for r, p in a.ranks.items() if p == e.pid), e.rank) if a and e.pid else e.rank
        if a is not None and any(f.rank == rank for f in a.failures):
            return
        what = e.signal or f"exit code {e.exit_code}"
        steps = a.steps.get(e.pid) if a is not None and e.pid is not None else None
        self._failed(e.pid, AttemptFailure(e.t, e.pid, rank, f"{what} (torchrun: exitcode {e.exit_code})", steps))

    # ------------------------------------------------------------------ derived
    @property
    def restarts(self) -> int:
        """Attempts after the first (the folded ones included)."""
        return max(0, len(self.attempts) - 1) + self.folded.attempts

    @property
    def max_step(self) -> int:
        """The largest job step any attempt reached."""
        return max([self.folded.max_reached, *(a.reached for a in self.attempts)])

    @property
    def job_steps(self) -> int:
        """The steps this run moved the job forward: the largest step reached less where the first attempt began."""
        first = self.folded.first_start_step
        if first is None:
            first = self.attempts[0].start_step if self.attempts else 0
        return self.max_step - first

    def restarts_lost(self) -> list[tuple[Attempt, Attempt, Lost]]:
        """(failed attempt, the attempt after it, what the restart cost), for the kept consecutive pairs."""
        kept = self.attempts
        return [(a, b, lost_between(a, b)) for a, b in zip(kept, kept[1:], strict=False)]

