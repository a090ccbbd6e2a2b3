"""TorchNeuron's eager NEFF compiles and its NEFF cache (issue 44).

A real eager model compiles hundreds or thousands of small NEFFs; the probe sends one
``neff_compiles`` a step (core/events/neff_events.py), and each becomes one compile record, a
*group* (source ``torchneuron``, ``count`` NEFFs, their seconds), whose cause says why:

- ``first``: the first shapes (step 0: every op's first NEFF);
- ``shape-change``: the step's batch shape was never seen before (``previous_shapes``: the step
  before's); after the warm-up it is a recompile;
- ``new-op``: the shapes were seen, yet something compiled: an op never seen (a new code path).

A shape that comes back compiles nothing (TorchNeuron's cache has it), so it makes no group. The
same step's group from another rank joins the row ("× N ranks"); its NEFFs are not added twice.

Counted once: the probe leaves the NEFFs of torch.compile graphs out of a group (their dynamo
compiles hold them) and the NEFF cache log's lines (``neff_log``) are never compiles: they say
what the persistent cache served, and they keep the live line going: while the log has seen more
misses than the groups account for, NEFFs are compiling now ("compiling NEFFs at step 20: 17 so
far, 0:00.7"), an open compile until the step's group arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from neurondesk.core.events import neff_events as nf
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.compile.compile_record import CompileRecord
from neurondesk.core.reduce.compile.compiles import CompileReducer
from neurondesk.core.reduce.evaluation import EvalReducer
from neurondesk.core.reduce.steps import StepReducer

OPEN_KEY = ("torchneuron", None)  # the live NEFF compile in CompileReducer.compile_open
RANK_JOIN_LAST = 16  # a group from another rank joins one of the latest groups of the same step and cause
SHAPES_KEPT = 10_000  # distinct batch shapes whose first step is kept
STEP_SHAPES_KEPT = 256  # the latest steps whose shape is kept (a group the pipeline finished late)
MARKS_KEPT = 1024  # log marks waiting for the log's bytes to be read (bounded)
MISSES_KEPT = 1_000_000  # MISS lines waiting for their step's mark (bounded)


@dataclass
class NeffLogCounts:
    """The NEFF cache log's lines, totals over the run."""

    path: str | None = None
    misses: int = 0
    stores: int = 0
    hits: int = 0
    relayed: int = 0
    keys: int = 0


@dataclass
class NeffCache:
    """The run's NEFF cache figures, for the summary (None: not known)."""

    compiles: int = 0  # eager NEFFs compiled (the groups' counts)
    compile_s: float | None = None  # their seconds (None: no source gave any: the log has no times)
    counted_from: str | None = None  # "metrics", "log" or "metrics and log": where the groups came from
    disagreement: str | None = None  # the metrics and the log counted differently, said in words
    graph_neffs: int = 0  # NEFFs of torch.compile graphs (their dynamo compiles count them)
    groups: int = 0
    memory_hits: int | None = None
    memory_misses: int | None = None
    disk_hits: int | None = None
    disk_misses: int | None = None
    evictions: int | None = None  # CompilationCache.Evictions, summed over the processes
    log: NeffLogCounts = field(default_factory=NeffLogCounts)


def _clock(seconds: float) -> str:
    """0:00.7, 1:02.5: minutes and seconds to the tenth."""
    minutes, rest = divmod(max(0.0, seconds), 60.0)
    return f"{int(minutes)}:{rest:04.1f}"


class NeffReducer:
    def __init__(self, compiles: CompileReducer, steps: StepReducer, evaluation: EvalReducer) -> None:
        self._compiles = compiles
        self._steps = steps
        self._eval = evaluation
        self.groups: list[CompileRecord] = []  # the group records (also in compiles.compiles)
        self.totals: dict[int, nf.NeffCacheTotals] = {}  # pid -> its latest cache counters
        self.first_totals: dict[int, nf.NeffCacheTotals] = {}  # pid -> its counters at its first step's end
        self.log = NeffLogCounts()
        self.accounted = 0  # NEFFs the groups account for (eager and graphs): the log's misses are these
        self.graph_neffs = 0
        self.open_step: int | None = None  # the step the live NEFF compile began in
        # the log's MISS lines placed at steps where the metrics cannot count (probe's neff_log_mark)
        # (size, the mark as a group of 0 NEFFs, its cause) whose bytes were not all read yet
        self.marks: list[tuple[int, nf.NeffCompiles, tuple[str, list | None]]] = []
        self.miss_ends: list[int] = []  # MISS lines' end offsets not placed yet
        self.read_to = -1
        self.shape_first: dict[tuple, int] = {}  # each batch shape's first step
        self.step_shapes: dict[int, tuple] = {}  # the latest steps' batch shapes
        self.from_metrics = 0  # NEFFs the metrics counted (eager), and the log placed
        self.from_log = 0

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"neff_compiles": self.on_compiles, "neff_cache": self.on_totals, "neff_log": self.on_log,
                "neff_log_mark": self.on_mark, "step": self.on_step, "steps": self.on_step}

    # ------------------------------------------------------------------ groups
    def on_compiles(self, e: nf.NeffCompiles, by_log: bool = False,
                    judged: tuple[str, list | None] | None = None) -> None:
        if by_log:
            self.from_log += e.count
        else:
            self.from_metrics += e.count
        self.accounted += e.count + e.graphs
        self.graph_neffs += e.graphs
        self._maybe_close()
        if e.count <= 0:
            return
        cause, previous = judged or self._cause(e)
        if self._join_own(e, cause, by_log) or self._join_rank(e, cause) is not None:
            return
        phase = e.phase or "train"
        noun = "NEFF" if e.count == 1 else "NEFFs"
        record = CompileRecord(
            index=0, t=e.t, step=e.step, source="torchneuron", cause=cause, duration_s=e.duration_s,
            location=None, graph_hash=None, cache="miss", trigger="eager", input_shapes=e.input_shapes,
            previous_shapes=previous, reason=_reason(e, cause, previous, by_log), frames=[], ok=True, error=None,
            name=f"{e.count:,} {noun}", phase=phase, recompile=cause == "shape-change",
            eval_phases_before=self._eval.phases, pid=e.pid, count=e.count)
        self.groups.append(self._compiles.add_group(record))

    def _cause(self, e: nf.NeffCompiles) -> tuple[str, list | None]:
        """A group sent after its step's own message (TorchNeuron's pipeline finished it steps later,
        the probe placed it by its samples) is judged by the shapes as they were at its step."""
        steps = self._steps
        if e.step == 0 or steps.first_step_end is None:
            return "first", None
        shape = tuple(e.input_shapes[0]) if e.input_shapes else None
        first = self.shape_first.get(shape)
        new = shape not in steps.shape_counts if first is None else first >= e.step
        if shape is not None and new:
            last = self.step_shapes.get(e.step - 1, steps.last_shape if first is None else None)
            return "shape-change", [list(last)] if last is not None else None
        return "new-op", None

    def _join_own(self, e: nf.NeffCompiles, cause: str, by_log: bool) -> bool:
        """More of a step's NEFFs from the same process (TorchNeuron's pipeline finished them after
        the step's first report; the probe placed them by their samples): the step's group grows."""
        for record in reversed(self.groups[-RANK_JOIN_LAST:]):
            if record.pid == e.pid and record.step == e.step and record.cause == cause:
                record.count += e.count
                if e.duration_s is not None:
                    record.duration_s = (record.duration_s or 0.0) + e.duration_s
                record.name = f"{record.count:,} NEFFs"
                record.reason = _reason(replace(e, count=record.count, duration_s=record.duration_s), cause,
                                        record.previous_shapes, by_log)
                counts = self._compiles.per_pid.get(e.pid) if e.pid is not None else None
                if counts is not None:
                    counts[0] += e.count
                    counts[1] += e.duration_s or 0.0
                return True
        return False

    def _join_rank(self, e: nf.NeffCompiles, cause: str) -> CompileRecord | None:
        """Another rank's group of the same step and cause: one row with its ranks, counted once."""
        rank = self._compiles.rank_of(e.pid)
        if rank is None:
            return None
        for record in reversed(self.groups[-RANK_JOIN_LAST:]):
            if record.pid != e.pid and record.step == e.step and record.cause == cause and rank not in record.ranks:
                record.ranks.append(rank)
                if e.duration_s is not None:
                    record.rank_durations.append(e.duration_s)
                return record
        return None

    # ------------------------------------------------------------------ cache counters and log
    def on_totals(self, e: nf.NeffCacheTotals) -> None:
        self.totals[e.pid] = e
        if not e.at_exit and e.pid not in self.first_totals:
            self.first_totals[e.pid] = e

    def on_mark(self, e: nf.NeffLogMark) -> None:
        """Sent before the step's own message, as neff_compiles is: its cause is judged now."""
        as_compiles = nf.NeffCompiles(t=e.t, pid=e.pid, step=e.step, count=0, phase=e.phase,
                                      input_shapes=e.input_shapes)
        self.marks.append((e.size, as_compiles, self._cause(as_compiles)))
        del self.marks[:-MARKS_KEPT]
        self._place()

    def _place(self) -> None:
        """Each mark whose bytes were all read: the MISS lines up to its size are its step's compiles
        (the lines ended before the step did), one group, their seconds unknown."""
        while self.marks and self.marks[0][0] <= self.read_to:
            size, m, judged = self.marks.pop(0)
            n = 0
            while n < len(self.miss_ends) and self.miss_ends[n] <= size:
                n += 1
            del self.miss_ends[:n]
            if n:
                self.on_compiles(replace(m, count=n), by_log=True, judged=judged)

    def on_log(self, e: nf.NeffCacheLog) -> None:
        if e.read_to is not None:
            if e.read_to < self.read_to:  # the file was truncated or replaced: its offsets begin again
                self.miss_ends.clear()
            self.read_to = e.read_to
        room = MISSES_KEPT - len(self.miss_ends)
        self.miss_ends.extend(e.miss_ends[:max(0, room)])
        log = self.log
        log.path = e.path
        log.misses += e.misses
        log.stores += e.stores
        log.hits += e.hits
        log.relayed += e.relayed
        log.keys = max(log.keys, e.keys)
        if log.misses > self.accounted and OPEN_KEY not in self._compiles.compile_open:
            self._compiles.compile_open[OPEN_KEY] = e.t
            self.open_step = self._steps.steps_done
        self._maybe_close()
        self._place()

    def on_step(self, e: ev.StepEnded | ev.StepBatch) -> None:
        """Each shape's first step and the latest steps' shapes (for a group judged late); a live
        compile the metrics never account for (metrics off, another process's log) ends with the
        step after the one it began in."""
        if e.input_shapes:
            shape = tuple(e.input_shapes[0])
            n = len(e) if isinstance(e, ev.StepBatch) else 1
            if shape not in self.shape_first and len(self.shape_first) < SHAPES_KEPT:
                self.shape_first[shape] = e.step
            for step in range(e.step + max(0, n - STEP_SHAPES_KEPT), e.step + n):
                self.step_shapes[step] = shape
            while len(self.step_shapes) > STEP_SHAPES_KEPT:
                del self.step_shapes[next(iter(self.step_shapes))]
        if self.open_step is not None and self._steps.steps_done > self.open_step + 1:
            self._close()

    def _maybe_close(self) -> None:
        if self.open_step is not None and self.accounted >= self.log.misses:
            self._close()

    def _close(self) -> None:
        self._compiles.compile_open.pop(OPEN_KEY, None)
        self.open_step = None

    # ------------------------------------------------------------------ derived
    def live_words(self, now: float) -> str | None:
        """"compiling NEFFs at step 20: 17 so far, 0:00.7" while NEFFs compile, else None."""
        since = self._compiles.compile_open.get(OPEN_KEY)
        if since is None:
            return None
        so_far = max(0, self.log.misses - self.accounted)
        return f"compiling NEFFs at step {self.open_step}: {so_far:,} so far, {_clock(now - since)}"

    def cache(self) -> NeffCache | None:
        """The run's NEFF figures, or None for a run that saw nothing of TorchNeuron's cache."""
        if not (self.groups or self.totals or self.log.path or self.graph_neffs):
            return None
        counted = [g for g in self.groups if g.counted]

        def summed(name: str) -> int | None:
            values = [getattr(t, name) for t in self.totals.values() if getattr(t, name) is not None]
            return sum(values) if values else None

        timed = [g.duration_s for g in counted if g.duration_s is not None]
        return NeffCache(compiles=sum(g.count for g in counted),
                         compile_s=round(sum(timed), 6) if timed else None,
                         counted_from=_sources(self.from_metrics, self.from_log), disagreement=self.disagreement(),
                         graph_neffs=self.graph_neffs, groups=len(self.groups),
                         memory_hits=summed("memory_hits"), memory_misses=summed("memory_misses"),
                         disk_hits=summed("disk_hits"), disk_misses=summed("disk_misses"),
                         evictions=summed("evictions"), log=self.log)

    def disagreement(self) -> str | None:
        """The metrics' count against the log's MISS lines, when both counted and neither total
        matches (the log's misses are the eager NEFFs, or those and torch.compile graphs' NEFFs)."""
        if not (self.from_metrics and self.log.misses) or self.log.misses in (self.from_metrics,
                                                                                self.from_metrics + self.graph_neffs):
            return None
        return (f"TorchNeuron's metrics counted {self.from_metrics:,} eager NEFF compiles, its NEFF cache log "
                f"{self.log.misses:,} cache misses ({self.log.path}): the figures here are the metrics'")

    def evictions(self) -> str | None:
        """The in-memory NEFF cache dropped NEFFs (CompilationCache.Evictions): a shape that comes back
        after its NEFF was dropped loads it from disk or compiles it again. Said with the numbers and
        the settings that bound the cache; None when nothing was evicted (or not counted)."""
        counted = [(pid, t.evictions) for pid, t in self.totals.items() if t.evictions]
        if not counted:
            return None
        evicted = sum(n for _, n in counted)
        misses = sum(t.memory_misses or 0 for t in self.totals.values())
        compiled = sum(t.compiles for t in self.totals.values())
        where = f" in {len(counted)} processes" if len(counted) > 1 else ""
        return (f"TorchNeuron's in-memory NEFF cache evicted {evicted:,} NEFFs{where} ({misses:,} in-memory misses, "
                f"{compiled:,} NEFFs compiled): shapes that come back after their NEFF was dropped are loaded from "
                "disk or compiled again. Raise NEURON_COMPILATION_CACHE_MAX_ENTRIES or "
                "NEURON_COMPILATION_CACHE_MAX_SIZE_MB (the in-memory cache's bounds) so that the run's NEFFs fit")

    def unshared(self) -> str | None:
        """Processes of the run that compile into different persistent NEFF cache folders, more than one
        of them compiling: each compiles NEFFs another already has (ranks of one job run the same
        program). Said with what it cost, the compiles and seconds past the busiest one's, and the fix."""
        own = {pid: t for pid, t in self.totals.items() if t.cache_dir}
        folders = {t.cache_dir for t in own.values()}
        compiling = [t for t in own.values() if t.compiles]
        if len(folders) < 2 or len(compiling) < 2:
            return None
        busiest = max(compiling, key=lambda t: t.compiles)
        extra = sum(t.compiles for t in compiling) - busiest.compiles
        timed = [t.compile_s for t in compiling if t.compile_s is not None]
        seconds = (f" and {sum(timed) - (busiest.compile_s or 0.0):,.1f} s of compiling"
                   if len(timed) == len(compiling) else "")
        return (f"{len(own)} processes compile into {len(folders)} different NEFF cache folders "
                f"({', '.join(sorted(folders)[:3])}{' ...' if len(folders) > 3 else ''}): the same NEFFs compiled "
                f"in {len(compiling)} places, {extra:,} compiles{seconds} past the busiest process's. Set one "
                "TORCH_NEURONX_NEFF_CACHE_DIR shared by every rank (a shared file system across nodes)")

    def first_step_cache(self, lead: int | None) -> str | None:
        """"cold" (something compiled before the first step ended), "warm" (the persistent cache
        served it all) or None (nothing known) for the first training step."""
        first = [c for c in self._compiles.compiles if c.counted and c.phase != "eval" and c.step == 0
                 and (c.pid is None or lead is None or c.pid == lead)]
        if any(c.cache != "hit" for c in first):
            return "cold"
        totals = self.first_totals.get(lead) if lead is not None else None
        if first or (totals is not None and (totals.disk_hits or 0) > 0) or (totals is None and self.log.hits):
            return "warm"
        return None


def _sources(metrics: int, log: int) -> str | None:
    return {(True, False): "metrics", (False, True): "log", (True, True): "metrics and log"}.get((metrics > 0, log > 0))


def _reason(e: nf.NeffCompiles, cause: str, previous: list | None, by_log: bool = False) -> str:
    shapes = e.input_shapes[0] if e.input_shapes else None
    what = {"first": "the first shapes",
            "shape-change": f"a new shape {shapes}" + (f" (the step before: {previous[0]})" if previous else ""),
            "new-op": "an op never seen (the shapes were seen before)"}[cause]
    took = f" in {e.duration_s:.2f} s" if e.duration_s is not None else ""
    if by_log:
        took = " (counted from its NEFF cache log: seconds unknown)"
    waited = ""
    if e.finished_step is not None and e.finished_step != e.step and e.after_step_s is not None:
        waited = (f"; the pipeline finished them {e.after_step_s:.2f} s after step {e.step} ended: "
                  f"step {e.finished_step} waited for them")
    return f"TorchNeuron compiled {e.count:,} NEFF{'s' if e.count != 1 else ''} at step {e.step}{took}: {what}{waited}"
