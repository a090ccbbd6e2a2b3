"""Every rank of a job: per-rank steps and steady figures, the job's own figures (a step is done
when every rank has ended it; samples/s sum over ranks), the straggler, and the rank that failed
first.

A rank is a process that reports steps (whatever its command line says). Its rank number comes
from the probe's hello (RANK / PJRT_LOCAL_PROCESS_RANK / LOCAL_RANK); without one, ranks are
numbered in the order they first report a step.

Straggler: with all-reduce every rank's step time becomes the same, so the slow rank is found
from its time *before* the sync (data wait plus forward, the probe's presync_s). Over the last
WINDOW steady steps that every rank has reported, a rank is a straggler when, step by step, its
presync exceeds the median of the other ranks' by more than max(10%, 2 ms) in at least 3 steps
of 4, and its median excess does too (a busy machine's noise is not consistent; a slow rank is).
Its cause is "data" when its extra data wait explains at least half of the excess, "compile"
when it compiled in that window and the others did not, else "compute".

Own time: a rank's steady step less the time it spent inside collectives (the probe's collective
phase: torch.distributed calls, and the part of DDP's all-reduce its backward waited for). Medians
over its last WINDOW steady steps that carry phases; the job of many nodes compares ranks on it
(core/job/culprit.py): pre-sync time ends where the backward starts, so a rank slow *after* its
backward (before a hand-written all_reduce) has the same pre-sync as the others, not the same own time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from itertools import islice
from operator import add

from neurondesk.core.events import run_events as ev
from neurondesk.core.node.failure_cause import first_cause
from neurondesk.core.reduce.attempts import AttemptReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import COLUMNS_FROM, steady_rate

WINDOW = 50  # steady steps per rank the straggler test looks at
STRAGGLER_REL, STRAGGLER_ABS_S = 0.10, 0.002
STRAGGLER_STEPS = 0.75  # share of the compared steps in which the excess must hold
COLLECTIVE = 5  # the collective's place in a step's phases (StepEnded.phases_s)


def median(xs) -> float | None:
    s = sorted(xs)
    if not s:
        return None
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _median_without(sorted_xs: list[float], x: float) -> float:
    """The median of ``sorted_xs`` with one occurrence of ``x`` taken out, in O(log n)."""
    import bisect

    i = bisect.bisect_left(sorted_xs, x)
    m = len(sorted_xs) - 1  # values left

    def at(k: int) -> float:  # k-th of the remaining values
        return sorted_xs[k if k < i else k + 1]

    return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2


@dataclass
class RankStats:
    pid: int
    rank: int
    local_rank: int | None = None
    steps: int = 0  # highest step index + 1
    steady_steps: int = 0
    steady_total_s: float = 0.0
    steady_samples: int = 0
    steady_tokens: int = 0
    samples_known: bool = True
    total_s: float = 0.0
    wait_s: float = 0.0
    compiled_steps: set[int] = field(default_factory=set)
    steady_times: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    by_step: dict[int, tuple[float, float]] = field(default_factory=dict)  # steady step -> (presync, data wait)
    recent_compile_step: int | None = None
    # by_step's keys came in ascending order (they do: a process counts its steps up), so its first
    # key is its smallest and the window drops it without a min() over 100 keys at every step
    by_step_ascending: bool = True
    by_step_top: int = -1
    last_step_t: float | None = None  # when it last ended a step (a rank blocked in a collective ends none)
    # the last WINDOW steady steps that carry phases: (own time, collective wait, data wait) of each
    split_times: deque = field(default_factory=lambda: deque(maxlen=WINDOW))

    @property
    def step_time_s(self) -> float | None:
        return median(self.steady_times)

    @property
    def presync_s(self) -> float | None:
        """Median time before the sync over the last WINDOW steady steps."""
        return median(p for p, _ in list(self.by_step.values())[-WINDOW:])

    @property
    def own_s(self) -> float | None:
        """Median own time a steady step: the step less its wait inside collectives."""
        return median(own for own, _, _ in self.split_times)

    @property
    def collective_s(self) -> float | None:
        """Median time a steady step spends inside collectives (waiting for the others, or in the link)."""
        return median(coll for _, coll, _ in self.split_times)

    @property
    def split_wait_s(self) -> float | None:
        """Median data wait of the same steps as own_s."""
        return median(wait for _, _, wait in self.split_times)

    @property
    def data_wait_fraction(self) -> float | None:
        return self.wait_s / self.total_s if self.total_s > 0 else None

    @property
    def mean_step_s(self) -> float | None:
        """The rank's steady step on the one basis (core/reduce/steps.py): its steady time over its steady steps.
        ``step_time_s``, the median, stays the robust figure the straggler and culprit rules compare."""
        return self.steady_total_s / self.steady_steps if self.steady_steps and self.steady_total_s > 0 else None

    @property
    def samples_per_s(self) -> float | None:
        """The rank's own steady rate, on the one basis (core/reduce/steps.py ``steady_rate``)."""
        return steady_rate(self.steady_samples, self.steady_steps, self.mean_step_s) if self.samples_known else None

    @property
    def tokens_per_s(self) -> float | None:
        return steady_rate(self.steady_tokens, self.steady_steps, self.mean_step_s) if self.steady_tokens else None


def _slowest(times) -> float | None:
    return max((t for t in times if t is not None), default=None)


@dataclass(frozen=True)
class Straggler:
    rank: int
    presync_s: float
    vs_median_s: float  # how much more than the other ranks' median
    cause: str  # "compute" | "data" | "compile"

    def words(self) -> str:
        return f"rank {self.rank} +{self.vs_median_s * 1000:.0f} ms before sync ({self.cause})"


@dataclass(frozen=True)
class FailedRank:
    rank: int | None
    pid: int
    t: float
    error: str
    step: int | None
    traceback: list[str]


class RankReducer:
    """The current attempt's ranks and failures (core/reduce/attempts.py keeps the earlier ones)."""
    def __init__(self, run: RunReducer, attempts: AttemptReducer | None = None) -> None:
        self._run = run
        self._attempts = attempts or AttemptReducer()
        self.before = 0  # rank records of earlier attempts, dropped when a restart's ranks came
        self.declared: dict[int, tuple[int | None, int | None]] = {}  # pid -> (rank, local_rank) from its hello
        self.ranks: dict[int, RankStats] = {}  # pid -> stats, for processes that report steps
        self.failures: list[FailedRank] = []

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"process_attached": self.on_process_attached, "step": self.on_step, "steps": self.on_steps,
                "compile": self.on_compile, "process_failed": self.on_process_failed,
                "rank_exited": self.on_rank_exited}

    # ------------------------------------------------------------------ reduce
    def on_process_attached(self, e: ev.ProcessAttached) -> None:
        self.declared[e.pid] = (e.rank, e.local_rank)
        old = self._attempts.is_old
        if not old(e.pid) and (any(map(old, self.ranks)) or any(old(f.pid) for f in self.failures)):
            self.before += sum(map(old, self.ranks))  # a restart: the attempts before are the attempts' own
            self.ranks = {pid: r for pid, r in self.ranks.items() if not old(pid)}
            self.failures = [f for f in self.failures if not old(f.pid)]
        stats = self.ranks.get(e.pid)
        if stats is not None and e.rank is not None:
            stats.rank, stats.local_rank = e.rank, e.local_rank

    def _stats(self, pid: int) -> RankStats:
        stats = self.ranks.get(pid)
        if stats is None:
            rank, local = self.declared.get(pid, (None, None))
            if rank is None:
                rank = len(self.ranks)
            stats = self.ranks[pid] = RankStats(pid=pid, rank=rank, local_rank=local)
        return stats

    def on_step(self, e: ev.StepEnded) -> None:
        if self._attempts.is_old(e.pid):  # a late step of an attempt a restart replaced
            return
        stats = self._stats(e.pid)
        stats.last_step_t = e.t
        self._one(stats, e.step, e.duration_s, e.data_wait_s, e.compiles > 0, e.samples, e.tokens,
                  e.presync_s, e.phases_s)

    def on_steps(self, b: ev.StepBatch) -> None:
        """A StepBatch: as its steps one by one (none of them compiled)."""
        if self._attempts.is_old(b.pid):
            return
        r, n, first = self._stats(b.pid), len(b), b.step
        if not n:
            return
        r.last_step_t = b.t if r.last_step_t is None else max(r.last_step_t, b.t)
        if (n >= COLUMNS_FROM and first >= self._run.warmup_steps and not (r.compiled_steps and any(
                s in r.compiled_steps for s in range(first, first + n)))
                and (b.presync_s is None or (r.by_step_ascending and first > r.by_step_top))):
            self._steady_batch(r, b)
            return
        none = [None] * n
        for i, d, w, sa, to, pr in zip(range(n), b.duration_s, b.data_wait_s, b.samples or none, b.tokens or none,
                                       b.presync_s or none, strict=True):
            self._one(r, first + i, d, w, False, sa, to, pr, b.phases_of(i))

    def _steady_batch(self, r: RankStats, b: ev.StepBatch) -> None:
        """``_one`` of each step of a batch of steady steps (past the warm-up, none compiled) whose
        steps come after every step the window holds: column by column, the sums in the same order."""
        run, n, first, ds = self._run, len(b), b.step, b.duration_s
        r.steps = max(r.steps, first + n)
        r.total_s = reduce(add, ds, r.total_s)
        r.wait_s = reduce(add, b.data_wait_s, r.wait_s)
        r.steady_steps += n
        r.steady_total_s = reduce(add, ds, r.steady_total_s)
        r.steady_times.extend(ds)
        if b.phases_s is not None:
            colls = b.phases_s[COLLECTIVE::ev.PHASES_PER_STEP]
            r.split_times.extend(zip([d - c for d, c in zip(ds, colls, strict=True)], colls, b.data_wait_s,
                                     strict=True))
        if b.presync_s is not None:
            by_step = r.by_step
            by_step.update(zip(range(first, first + n), zip(b.presync_s, b.data_wait_s, strict=True), strict=True))
            r.by_step_top = max(r.by_step_top, first + n - 1)
            extra = len(by_step) - 2 * WINDOW  # the window keeps its newest 2 * WINDOW steps
            if extra > 0:
                for step in list(islice(by_step, extra)):
                    del by_step[step]
        samples = [run.samples_override] * n if run.samples_override is not None else b.samples
        tokens = [run.tokens_override] * n if run.tokens_override is not None else b.tokens
        if samples is None:
            r.samples_known = False
        else:
            r.steady_samples += sum(samples)
        if tokens is not None:
            r.steady_tokens += sum(tokens)

    def _one(self, r: RankStats, step: int, duration: float, wait: float, compiled: bool, samples: int | None,
             tokens: int | None, presync: float | None, phases: list[float] | None = None) -> None:
        r.steps = max(r.steps, step + 1)
        r.total_s += duration
        r.wait_s += wait
        if step < self._run.warmup_steps or compiled or step in r.compiled_steps:
            return
        if self._run.samples_override is not None:
            samples = self._run.samples_override
        if self._run.tokens_override is not None:
            tokens = self._run.tokens_override
        r.steady_steps += 1
        r.steady_total_s += duration
        r.steady_times.append(duration)
        if phases:
            r.split_times.append((duration - phases[COLLECTIVE], phases[COLLECTIVE], wait))
        if presync is not None:
            by_step, top = r.by_step, r.by_step_top
            if step < top and step not in by_step:
                r.by_step_ascending = False
            by_step[step] = (presync, wait)
            r.by_step_top = max(top, step)
            if len(by_step) > 2 * WINDOW:
                del by_step[next(iter(by_step)) if r.by_step_ascending else min(by_step)]
        if samples is None:
            r.samples_known = False
        else:
            r.steady_samples += samples
        r.steady_tokens += tokens or 0

    def on_compile(self, e: ev.CompileFinished) -> None:
        if e.pid is None or e.phase == "eval":
            return
        r = self.ranks.get(e.pid)
        step = e.step if e.step is not None else (r.steps if r else None)
        if r is not None and step is not None:
            r.compiled_steps.add(step)
            r.recent_compile_step = step

    def on_rank_exited(self, e: ev.RankExited) -> None:
        """torchrun's root cause: a rank that died without a Python exception (a signal) is a failure too;
        one that raised was already reported by its probe, with its traceback."""
        rank = self.declared[e.pid][0] if e.pid in self.declared and self.declared[e.pid][0] is not None else e.rank
        if not e.root_cause or any(f.rank == rank for f in self.failures) or self._attempts.is_old(e.pid):
            return
        stats = next((r for r in self.ranks.values() if r.rank == rank), None)
        what = e.signal or f"exit code {e.exit_code}"
        self.failures.append(FailedRank(rank, e.pid or (stats.pid if stats else 0), e.t,
                                        f"{what} (torchrun: exitcode {e.exit_code})",
                                        stats.steps if stats else None, []))

    def on_process_failed(self, e: ev.ProcessFailed) -> None:
        if self._attempts.is_old(e.pid):
            return
        rank = self.ranks[e.pid].rank if e.pid in self.ranks else self.declared.get(e.pid, (None, None))[0]
        self.failures.append(FailedRank(rank, e.pid, e.t, e.error, e.step, list(e.traceback)))

    # ------------------------------------------------------------------ derived
    @property
    def world(self) -> int:
        return max(1, len(self.ranks))

    def by_rank(self) -> list[RankStats]:
        return sorted(self.ranks.values(), key=lambda r: (r.rank, r.pid))

    @property
    def job_steps(self) -> int:
        """Steps every rank has ended."""
        return min((r.steps for r in self.ranks.values()), default=0)

    @property
    def job_step_time_s(self) -> float | None:
        """The slowest rank's median steady step (the robust figure the culprit rules compare)."""
        return _slowest(r.step_time_s for r in self.ranks.values())

    @property
    def job_mean_step_s(self) -> float | None:
        """The job's steady step on the one basis: the slowest rank's mean step (the job goes at its pace)."""
        return _slowest(r.mean_step_s for r in self.ranks.values())

    def stragglers(self) -> list[Straggler]:
        ranks = list(self.ranks.values())
        if len(ranks) < 2:
            return []
        common = set.intersection(*(set(r.by_step) for r in ranks))
        steps = sorted(common)[-WINDOW:]
        if len(steps) < 5:
            return []
        n = len(ranks)
        excess = [[0.0] * len(steps) for _ in range(n)]  # rank x step: presync over the others' median
        wait_excess = [[0.0] * len(steps) for _ in range(n)]
        over = [0] * n
        for j, step in enumerate(steps):  # each step sorted once: the others' median is read off it
            pre = [r.by_step[step][0] for r in ranks]
            wait = [r.by_step[step][1] for r in ranks]
            pre_sorted, wait_sorted = sorted(pre), sorted(wait)
            for i in range(n):
                base = _median_without(pre_sorted, pre[i])
                excess[i][j] = pre[i] - base
                wait_excess[i][j] = wait[i] - _median_without(wait_sorted, wait[i])
                over[i] += excess[i][j] > max(STRAGGLER_REL * base, STRAGGLER_ABS_S)
        base_all = median(r.by_step[s][0] for r in ranks for s in steps)
        found = []
        for i, r in enumerate(ranks):
            typical = median(excess[i])
            if over[i] >= STRAGGLER_STEPS * len(steps) and typical > max(STRAGGLER_REL * base_all, STRAGGLER_ABS_S):
                cause = self._cause(r, ranks, typical, median(wait_excess[i]))
                found.append(Straggler(r.rank, median(r.by_step[s][0] for s in steps), typical, cause))
        return sorted(found, key=lambda x: -x.vs_median_s)

    @staticmethod
    def _cause(r: RankStats, ranks: list[RankStats], excess: float, wait_excess: float) -> str:
        if wait_excess >= excess / 2:
            return "data"
        if r.recent_compile_step is not None and all(o.recent_compile_step is None or
                                                     o.recent_compile_step < r.recent_compile_step - WINDOW
                                                     for o in ranks if o is not r):
            return "compile"
        return "compute"

    @property
    def failed_first(self) -> FailedRank | None:
        """The rank that failed first: the others died of the teardown that followed (core/node/failure_cause.py)."""
        return first_cause(self.failures, lambda f: f.t, lambda f: f.error)

    def presync_levels(self, stragglers: list[Straggler] | None = None) -> list[RankLevel]:
        """Each rank's median pre-sync time against the median over all ranks, as a level the
        views colour: "straggler" (named by stragglers()), "slower" (above the median by more than
        max(10%, 2 ms), not consistently enough to be a straggler), "normal", or "unknown" (no
        pre-sync time yet). ``stragglers``: stragglers() already computed (it is the costly part)."""
        named = {s.rank for s in (self.stragglers() if stragglers is None else stragglers)}
        ranks = self.by_rank()
        mid = median(r.presync_s for r in ranks if r.presync_s is not None)
        out = []
        for r in ranks:
            p = r.presync_s
            vs = p - mid if p is not None and mid is not None else None
            if p is None or vs is None:
                level = "unknown"
            elif r.rank in named:
                level = "straggler"
            elif vs > max(STRAGGLER_REL * mid, STRAGGLER_ABS_S):
                level = "slower"
            else:
                level = "normal"
            out.append(RankLevel(r.rank, r.pid, p, vs, level))
        return out

    @property
    def median_presync_s(self) -> float | None:
        """The median over the ranks of each rank's median pre-sync time."""
        return median(r.presync_s for r in self.ranks.values() if r.presync_s is not None)


@dataclass(frozen=True)
class RankLevel:
    rank: int
    pid: int
    presync_s: float | None
    vs_median_s: float | None  # against the median over all ranks
    level: str  # "normal" | "slower" | "straggler" | "unknown"


def job_rate(reducer: RankReducer, tokens: bool = False) -> float | None:
    """The job's steady samples/s (or tokens/s): every rank's amount a steady step, summed, at the job's
    step time (the slowest rank's mean step: its pace); rate x step time is the job's step. None unless
    every rank knows its own."""
    ranks = list(reducer.ranks.values())
    if not ranks or any((r.tokens_per_s if tokens else r.samples_per_s) is None for r in ranks):
        return None
    per_step = sum((r.steady_tokens if tokens else r.steady_samples) / r.steady_steps for r in ranks)
    return steady_rate(per_step, 1, reducer.job_mean_step_s)
