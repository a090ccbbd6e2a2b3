"""Compiles, merged from four sources, and graph breaks.

- probe: the compile itself (duration, sync point, shapes); the reference when a probe runs.
- pt-xla-debug: the same compile seen in PT_XLA_DEBUG output; dropped when a probe reports it.
- neuron-log: the Neuron compiler's line adds the persistent-cache verdict and module hash to the
  probe's record (or stands alone without a probe). A named block of an export tool
  ("***** Compiling unet *****") always stands alone: those compiles run outside the graphs the
  probe watches.
- dynamo: the probe's dynamo callback reports a torch.compile compile; the guard failure that
  caused a recompile comes separately, from TORCH_LOGS output (a DynamoRecompile), and is paired
  with it here whichever arrives first (see compile_causes.py).

A *recompile* is a compile of a point (a sync site, a graph name, a dynamo frame) that was
compiled before in the same phase (training or evaluation): the first compile of a new graph or
of a new phase is not one. Recompiles *after warm-up* are those at a training step >= the warm-up
steps, and those in any evaluation phase after the first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.compile.compile_causes import BreakJoin, DynamoReasons
from neurondesk.core.reduce.compile.compile_record import CompileRecord
from neurondesk.core.reduce.evaluation import EvalReducer
from neurondesk.core.reduce.processes import ProcessReducer
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import StepReducer

# dynamo compiles a guard failure never causes (the probe's point ends with the callback trigger):
# a lazily compiled backward, autotuning, CUDA graph recording. They do not wait for a reason.
NOT_GUARDED = (":LAZY_BACKWARD", ":TRITON_AUTOTUNING", ":CUDAGRAPH_RECORDING")
STORM_STEPS = 3  # consecutive training steps each compiling a larger graph than the last: the storm
GROWTH_WINDOW = 256  # steps of largest graphs kept to find the storm (its diagnostic names its first steps)


def _growing_suffix(steps: list[CompileRecord]) -> list[CompileRecord]:
    """The longest run at the end of ``steps`` in which each step's graph is larger than the last."""
    i = len(steps) - 1
    while i > 0 and (steps[i].graph_inputs or 0) > (steps[i - 1].graph_inputs or 0):
        i -= 1
    return steps[i:]


def point_of(e: ev.CompileFinished) -> str | None:
    """The point a compile belongs to: its sync site, else its line, graph hash or name."""
    return e.point or e.location or e.graph_hash or e.name


class CompileReducer:
    def __init__(self, run: RunReducer, procs: ProcessReducer, steps: StepReducer,
                 evaluation: EvalReducer | None = None) -> None:
        self._run = run
        self._procs = procs
        self._steps = steps
        self._eval = evaluation if evaluation is not None else EvalReducer(procs)
        self.compiles: list[CompileRecord] = []
        self.compile_open: dict[tuple, float] = {}  # (source, pid) -> start t
        self.points: dict[tuple, list] = {}  # (phase, sync point) -> input shapes seen there
        self.pending_neuron: list[ev.CompileFinished] = []
        self.dynamo = DynamoReasons()
        self.graph_breaks: list[ev.GraphBreak] = []
        self.breaks = BreakJoin()  # each graph break to the dynamo compile whose frame broke
        self.first_ok: CompileRecord | None = None  # the first compile that succeeded, of any kind
        # "first compile": the first training step's longest graph, the wall the user waits for
        self.first_train: CompileRecord | None = None
        self.step_largest: list[CompileRecord] = []  # per consecutive step, its largest graph (bounded)
        self.growing: list[CompileRecord] = []  # the latest run of steps, each compiling a larger graph
        self.longest_growth: list[CompileRecord] = []
        self.per_pid: dict[int, list] = {}  # pid -> [compiles, seconds, late recompiles]

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"compile_started": self.on_compile_started, "compile": self.on_compile,
                "dynamo_recompile": self.on_dynamo_recompile, "graph_break": self.on_graph_break}

    # ------------------------------------------------------------------ reduce
    def on_compile_started(self, e: ev.CompileStarted) -> None:
        self.compile_open[(e.source, e.pid)] = e.t

    def on_compile(self, e: ev.CompileFinished) -> None:
        started = self.compile_open.pop((e.source, e.pid), None)
        if e.source == "probe":
            self.compile_open.pop(("pt-xla-debug", e.pid), None)
        elif e.source == "neuron-log":  # an export tool's block around wrapper compiles starts without a pid
            self.compile_open.pop((e.source, None), None)
        if e.source == "neuron-log" and e.name is None and self._procs.processes:
            # A probe is watching: it reports this compile; the Neuron log only adds the
            # persistent-cache verdict and module hash to the probe's record.
            self._attach_neuron(e)
            return
        if e.source == "pt-xla-debug" and self._procs.processes:
            return  # the probe reports the same compile with its duration
        duration = e.duration_s
        if duration is None and started is not None and e.cache != "hit":
            duration = max(0.0, e.t - started)
        step = e.step if e.step is not None else self._steps.steps_done
        cause, previous, recompile = self._classify(e)
        if self._merge_rank(e, cause, step, duration):
            return
        record = CompileRecord(
            index=len(self.compiles) + 1, t=e.t, step=step, source=e.source, cause=cause,
            duration_s=duration, location=e.location, graph_hash=e.graph_hash, cache=e.cache,
            trigger=e.trigger, input_shapes=e.input_shapes, previous_shapes=previous,
            reason=e.reason, frames=list(e.frames), ok=e.ok, error=e.error, name=e.name,
            phase=e.phase or "train", recompile=recompile, eval_phases_before=self._eval.phases,
            graph_inputs=e.graph_inputs, pid=e.pid, point_key=point_of(e), library=e.library)
        self._count_for_rank(record, e, duration)
        if (e.source == "dynamo" and recompile and record.reason is None
                and not (e.point or "").endswith(NOT_GUARDED)):
            start = started if started is not None else e.t - (duration or 0.0)
            self.dynamo.recompile(record, start, e.pid)
        self.breaks.on_compile(record)  # a dynamo compile: the break its frame made, if any
        if self.pending_neuron and e.source == "probe":
            neuron = self.pending_neuron.pop(0)
            record.cache = neuron.cache or record.cache
            record.graph_hash = record.graph_hash or neuron.graph_hash
        self.compiles.append(record)
        self._track_growth(record)
        if self.first_ok is None and record.ok:
            self.first_ok = record
        if record.ok and record.phase == "train" and record.input_shapes and self._first_step_graph(record):
            self.first_train = record
        lead = self._procs.lead_pid
        if record.phase != "eval" and (e.pid is None or e.pid == lead or lead is None):
            self._steps.mark_compiled(step)  # an evaluation's compile is not its training step's

    def _first_step_graph(self, record: CompileRecord) -> bool:
        """The first training step's graph: its step's longest (a value read compiles a tiny one first)."""
        first = self.first_train
        if first is None:
            return True
        return (record.step == first.step and record.pid == first.pid
                and (record.duration_s or 0.0) > (first.duration_s or 0.0))

    # ------------------------------------------------------------------ many ranks
    def rank_of(self, pid: int | None) -> int | None:
        proc = self._procs.processes.get(pid) if pid is not None else None
        return proc.rank if proc is not None else None

    def _count_for_rank(self, record: CompileRecord, e: ev.CompileFinished, duration: float | None) -> None:
        rank = self.rank_of(e.pid)
        if rank is not None:
            record.ranks.append(rank)
            if duration is not None:
                record.rank_durations.append(duration)
            if e.cache == "hit":
                record.hit_ranks.append(rank)
        if e.pid is not None:
            counts = self.per_pid.setdefault(e.pid, [0, 0.0, 0])
            counts[0] += 1
            counts[1] += duration or 0.0
            counts[2] += 1 if record.recompile and self.after_warmup(record) else 0

    def _merge_rank(self, e: ev.CompileFinished, cause: str, step: int, duration: float | None) -> bool:
        """The same graph compiled by another rank of the job: one row "x N ranks", not N rows."""
        rank = self.rank_of(e.pid)
        if rank is None or e.pid is None:
            return False
        base = point_of(e)
        phase = e.phase or "train"
        for record in reversed(self.compiles[-64:]):
            if (record.pid != e.pid and rank not in record.ranks and record.phase == phase
                    and record.cause == cause and (record.step is None or abs(record.step - step) <= 2)
                    and (record.point_key == base)):
                self._count_for_rank(record, e, duration)  # this rank's compile joins the row
                if e.pid == self._procs.lead_pid and phase != "eval":
                    self._steps.mark_compiled(step)
                return True
        return False

    def _classify(self, e: ev.CompileFinished) -> tuple[str, list | None, bool]:
        """(cause, the shapes before a shape change, whether it is a recompile): first /
        value-access / shape-change / new-graph, from the phase, the sync point and the shapes."""
        value_read = e.trigger == "value-access"
        base = point_of(e)
        if base is None:
            if self.first_ok is None:
                return ("value-access" if value_read else "first"), None, False
            return ("value-access" if value_read else "new-graph"), None, True
        key = (e.pid, e.phase or "train", base)  # each rank compiles its own graphs
        seen = self.points.get(key)
        if not e.ok:  # a failed attempt leaves the graph's slot to the one that succeeds
            return ("first" if seen is None else "new-graph"), None, seen is not None
        shapes = e.input_shapes
        if seen is None:
            self.points[key] = [shapes] if shapes is not None else []
            return ("value-access" if value_read else "first"), None, False
        if shapes is not None and seen and shapes not in seen:
            previous = seen[-1]
            seen.append(shapes)
            return "shape-change", previous, True
        if shapes is not None and not seen:
            seen.append(shapes)
        # A new graph at a point with the same shapes (Trainer's first logging step, the optimizer's
        # second-step graph) is a graph of its own, compiled once: not a recompile. A value read
        # that compiles again is one, and so is dynamo compiling a frame again (its guard says why).
        return ("value-access" if value_read else "new-graph"), None, value_read or e.source == "dynamo"

    def _track_growth(self, c: CompileRecord) -> None:
        """The recompile storm: each training step compiles a graph with more inputs than the last
        (nothing cuts the lazy graph, so each holds every step before it). A step's largest graph
        is what counts, whatever the order of its compiles: nanoGPT on XLA through a launcher
        compiles the previous step's graph again first, then the larger one."""
        if c.phase == "eval" or c.graph_inputs is None or c.step is None:
            return
        steps = self.step_largest  # the largest graph of each of the latest consecutive steps
        if steps and c.step == steps[-1].step:
            if c.graph_inputs > (steps[-1].graph_inputs or 0):
                steps[-1] = c
        elif steps and c.step == steps[-1].step + 1:
            steps.append(c)
            del steps[:-GROWTH_WINDOW]
        else:
            steps[:] = [c]
        run = _growing_suffix(steps)
        self.growing = run
        if len(run) >= len(self.longest_growth):
            self.longest_growth = run

    @property
    def graph_grows(self) -> bool:
        """The storm is on now: the latest steps each compiled a larger graph."""
        return len(self.growing) >= STORM_STEPS and self.growing[-1].step >= self._steps.steps_done - 1

    def on_dynamo_recompile(self, e: ev.DynamoRecompile) -> None:
        self.dynamo.reason(e)

    def _attach_neuron(self, e: ev.CompileFinished) -> None:
        for record in reversed(self.compiles):
            if record.source == "probe" and abs(record.t - e.t) < 5 and record.cache in (None, "miss"):
                if e.cache:
                    record.cache = e.cache
                record.graph_hash = record.graph_hash or e.graph_hash
                return
        self.pending_neuron.append(e)

    def on_graph_break(self, e: ev.GraphBreak) -> None:
        if e.step is None:  # from the log: the step in progress
            e = dataclasses.replace(e, step=self._steps.steps_done)
        self.graph_breaks.append(e)
        self.breaks.on_break(e, ("dynamo", e.pid) in self.compile_open, self.compiles[-16:])

    # ------------------------------------------------------------------ derived
    @property
    def compile_total_s(self) -> float:
        return sum((c.duration_s or 0.0 for c in self.compiles if c.counted), 0.0)

    @property
    def compile_count(self) -> int:
        """Compiles counted (a graph_stats row another compile already holds is listed, not counted); a
        group of TorchNeuron's eager NEFFs counts its NEFFs."""
        return sum(c.count for c in self.compiles if c.counted)

    def add_own(self, record: CompileRecord) -> CompileRecord:
        """A compile no event of the four sources reported (a graph_stats row of its own): appended, numbered."""
        record.index = len(self.compiles) + 1
        self.compiles.append(record)
        return record

    def add_group(self, record: CompileRecord) -> CompileRecord:
        """A group of TorchNeuron's eager NEFFs (core/reduce/compile/neff.py): numbered, counted, its step marked."""
        self.add_own(record)
        self._count_for_rank(record, ev.CompileFinished(t=record.t, source=record.source, pid=record.pid),
                             record.duration_s)
        if record.pid is not None:  # its NEFFs, not one
            self.per_pid[record.pid][0] += record.count - 1
        self.first_ok = self.first_ok or record
        if record.phase == "train" and self._first_step_graph(record):
            self.first_train = record
        lead = self._procs.lead_pid
        if record.phase != "eval" and record.step is not None and (record.pid in (None, lead) or lead is None):
            self._steps.mark_compiled(record.step)
        return record

    @property
    def first_compile_s(self) -> float | None:
        first = self.first_train or self.first_ok
        return first.duration_s if first is not None else None

    def after_warmup(self, c: CompileRecord) -> bool:
        if c.phase == "eval":
            return c.eval_phases_before >= 1
        return c.step is not None and c.step >= self._run.warmup_steps

    def late_recompiles(self) -> list[CompileRecord]:
        return [c for c in self.compiles if c.recompile and self.after_warmup(c)]

    @property
    def recompiles_after_warmup(self) -> int:
        return len(self.late_recompiles())

    def recompiles_by_phase(self) -> dict[str, int]:
        counts = {"train": 0, "eval": 0}
        for c in self.late_recompiles():
            counts[c.phase] = counts.get(c.phase, 0) + 1
        return counts

    def open_compile_since(self) -> float | None:
        return min(self.compile_open.values()) if self.compile_open and not self._run.finished else None


def seconds_unknown(compiles: list[CompileRecord]) -> bool:
    """Compiles were counted and none has its seconds (TorchNeuron's NEFFs counted from its log)."""
    counted = [c for c in compiles if c.counted]
    return bool(counted) and all(c.duration_s is None for c in counted)
