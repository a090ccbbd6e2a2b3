"""RunState: the pure reduction of a run's events.

`state.apply(event)` for every event, in journal order; the same events always give the same
state, whether they come from a live run or a replayed journal. No I/O, no clock: anything that
depends on "now" takes it as an argument.

RunState is a thin composition of focused reducers (core/reduce/: run, processes, steps, loss,
compiles, telemetry, log); `apply` dispatches each event by kind to the reducers that handle it.
The attributes core's readers use (the figures, the summary, the checks, the RunView the views read:
``steps_done``, ``compiles``, ``steady_quantile()`` ...) are read-only delegates to those reducers;
``state.parts`` holds them, for core only: the views read core/view/run_view.py's RunView, every other
part outside core core/view/read_views.py's frozen readings (tests/contracts/test_one_way_to_read.py).

`apply` never raises: an event a handler chokes on (a malformed but decodable event, a bug) is
counted in ``reduce_errors`` and the first few are kept as text in ``reduce_error_samples``; the
run, or its replay, goes on. Steady state: see core/reduce/steps.py.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, NamedTuple

from neurondesk.core.events import run_events as ev
from neurondesk.core.node.flight_recorder import FlightView
from neurondesk.core.node.hang import Progress, detect_hang
from neurondesk.core.reduce import steps as steps_rates
from neurondesk.core.reduce.attempts import AttemptReducer
from neurondesk.core.reduce.checkpoints import CheckpointReducer
from neurondesk.core.reduce.compile.compiles import CompileRecord, CompileReducer
from neurondesk.core.reduce.compile.neff import NeffReducer
from neurondesk.core.reduce.compile.wall import CompileWallReducer
from neurondesk.core.reduce.disk import DiskReducer
from neurondesk.core.reduce.evaluation import EvalReducer
from neurondesk.core.reduce.job import JobReducer
from neurondesk.core.reduce.log import OUTPUT_KEEP, LogReducer
from neurondesk.core.reduce.loss import LossReducer, ScriptRate
from neurondesk.core.reduce.memory import MemoryReducer
from neurondesk.core.reduce.phases import PhaseReducer
from neurondesk.core.reduce.processes import ProcessReducer
from neurondesk.core.reduce.ranks import RankReducer, job_rate
from neurondesk.core.reduce.run import RunReducer
from neurondesk.core.reduce.steps import (
    HISTORY,
    INPUT_BOUND,
    INPUT_WARN,
    SplitPoint,
    StepRecord,
    StepReducer,
    quantile,
    quantile_sorted,
)
from neurondesk.core.reduce.telemetry import TelemetryReducer

__all__ = ["HISTORY", "INPUT_BOUND", "INPUT_WARN", "OUTPUT_KEEP", "CompileRecord", "RunState", "SplitPoint",
           "StepRecord", "quantile", "quantile_sorted"]

REDUCE_ERRORS_KEPT = 5  # the first few reduce errors are kept as text; all are counted


class Parts(NamedTuple):
    attempts: AttemptReducer  # the job's attempts (restarts): first, so the others know a process's attempt
    run: RunReducer
    procs: ProcessReducer
    steps: StepReducer
    loss: LossReducer
    compiles: CompileReducer
    telemetry: TelemetryReducer
    log: LogReducer
    evaluation: EvalReducer
    ranks: RankReducer
    disk: DiskReducer  # free space, growth, output not stored (core/reduce/disk.py)
    job: JobReducer  # which job, node and ranks (core/events/job_identity.py)
    phases: PhaseReducer  # steady sums of the step phases per process (core/figures/phases.py reads them)
    memory: MemoryReducer  # memory series over the steady steps, limits (core/findings/memory_creep.py reads them)
    neff: NeffReducer  # TorchNeuron's eager NEFF compiles (groups) and its NEFF cache (core/reduce/compile/neff.py)
    checkpoints: CheckpointReducer  # checkpoint saves and loads, job seconds (core/reduce/checkpoints.py)
    compile_wall: CompileWallReducer  # host memory while compilers run (core/node/compile_wall.py)


def _via(part: str, name: str) -> Any:
    """A read-only attribute of RunState that is ``state.parts.<part>.<name>``."""
    return property(attrgetter(f"parts.{part}.{name}"), doc=f"parts.{part}.{name}")


class RunState:
    def __init__(self) -> None:
        attempts = AttemptReducer()
        run = RunReducer()
        procs = ProcessReducer(attempts)
        steps = StepReducer(run, procs)
        evaluation = EvalReducer(procs)
        compiles = CompileReducer(run, procs, steps, evaluation)
        ranks = RankReducer(run, attempts)
        self.parts = Parts(attempts=attempts, run=run, procs=procs, steps=steps, loss=LossReducer(run, steps), compiles=compiles,
                           telemetry=TelemetryReducer(run, steps, compiles), log=LogReducer(),
                           evaluation=evaluation, ranks=ranks, disk=DiskReducer(), job=JobReducer(),
                           phases=PhaseReducer(run, steps, ranks),
                           memory=MemoryReducer(run, steps, compiles, ranks),
                           neff=NeffReducer(compiles, steps, evaluation), checkpoints=CheckpointReducer(attempts),
                           compile_wall=CompileWallReducer())
        self.reduce_errors = 0  # events a handler raised on (counted, skipped)
        self.reduce_error_samples: list[str] = []  # the first REDUCE_ERRORS_KEPT, as "kind at t: error"
        self._wire()

    def _wire(self) -> None:
        table: dict[str, list[Callable[[ev.Event], None]]] = {}
        for part in self.parts:  # in this order: processes see a step before the StepReducer does
            for kind, handler in part.handlers().items():
                table.setdefault(kind, []).append(handler)
        self._dispatch = {kind: tuple(handlers) for kind, handlers in table.items()}
        self._touch = self.parts.run.touch

    # ------------------------------------------------------------------ checkpoint
    # A checkpoint (store/checkpoint.py) is this object's data: the reducers and what they hold
    # (dataclasses, deques, counters, arrays of core types). The dispatch table is bound methods:
    # rebuilt on load, never stored.
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_dispatch", "_touch")}

    def __setstate__(self, data: dict[str, Any]) -> None:
        self.__dict__.update(data)
        self.parts = Parts(*self.parts)
        self._wire()

    # ------------------------------------------------------------------ reduce
    def apply(self, e: ev.Event) -> None:
        try:
            self._touch(e.t)
            for handler in self._dispatch.get(e.kind, ()):
                handler(e)
        except Exception as exc:  # noqa: BLE001 - one bad event must not stop the run or its replay
            self._failed(e, exc)

    def _failed(self, e: Any, exc: Exception) -> None:
        self.reduce_errors += 1
        if len(self.reduce_error_samples) < REDUCE_ERRORS_KEPT:
            kind = getattr(e, "kind", None) or type(e).__name__
            t = getattr(e, "t", None)
            at = f" at t={t}" if isinstance(t, int | float) else ""
            self.reduce_error_samples.append(f"{kind}{at}: {type(exc).__name__}: {exc}"[:300])

    @property
    def reduce_error_text(self) -> str | None:
        """One line for views and the summary, or None when every event was reduced."""
        if not self.reduce_errors:
            return None
        return (f"{self.reduce_errors} event(s) could not be reduced and were skipped "
                f"(first: {self.reduce_error_samples[0]})")

    @property
    def steps_lost_text(self) -> str | None:
        n = self.steps_lost
        return f"{n:,} step events were lost (the recorder fell behind)" if n else None

    # ------------------------------------------------------------------ the run
    run_id = _via("run", "run_id")
    command = _via("run", "command")
    started_t = _via("run", "started_t")
    last_t = _via("run", "last_t")
    event_count = _via("run", "event_count")
    warmup_steps = _via("run", "warmup_steps")
    target_loss = _via("run", "target_loss")
    samples_override = _via("run", "samples_override")
    tokens_override = _via("run", "tokens_override")
    steps_requested = _via("run", "steps_requested")
    instance_type = _via("run", "instance_type")
    price_per_hour = _via("run", "price_per_hour")
    price_source = _via("run", "price_source")
    config = _via("run", "config")
    exit_code = _via("run", "exit_code")
    exit_signal = _via("run", "exit_signal")
    finished = _via("run", "finished")
    stderr_tail = _via("run", "stderr_tail")
    left_running = _via("run", "left_running")
    budget_usd = _via("run", "budget_usd")

    def elapsed_s(self, now: float | None = None) -> float:
        return self.parts.run.elapsed_s(now)

    # ------------------------------------------------------------------ processes
    processes = _via("procs", "processes")
    lead_pid = _via("procs", "lead_pid")
    step_pids = _via("procs", "step_pids")
    device_kind = _via("procs", "device_kind")
    device_name = _via("procs", "device_name")
    precision = _via("procs", "precision")
    world = _via("procs", "world")

    # ------------------------------------------------------------------ steps and throughput
    @property
    def steps_done(self) -> int:
        """Steps the whole job has done: with many ranks, those every rank has ended; after a restart, the
        largest step the job reached less where it began (core/reduce/attempts.py)."""
        attempts = self.parts.attempts
        if attempts.restarts:
            return attempts.job_steps
        ranks = self.parts.ranks
        return ranks.job_steps if ranks.world > 1 else self.parts.steps.steps_done
    current_step = _via("steps", "steps_done")  # the step in progress (the lead's next step index)
    history = _via("steps", "history")
    total_step_s = _via("steps", "total_step_s")
    total_wait_s = _via("steps", "total_wait_s")
    steady_from = _via("steps", "steady_from")
    steady_times = _via("steps", "steady_times")
    steady_total_s = _via("steps", "steady_total_s")
    steady_samples = _via("steps", "steady_samples")
    steady_tokens = _via("steps", "steady_tokens")
    steady_samples_known = _via("steps", "steady_samples_known")
    steady_tokens_known = _via("steps", "steady_tokens_known")
    steady_wait_s = _via("steps", "steady_wait_s")
    steady_execs = _via("steps", "steady_execs")
    all_execs = _via("steps", "all_execs")
    steps_with_compile = _via("steps", "steps_with_compile")
    split_points = _via("steps", "split_points")
    @property
    def steady_samples_per_s(self) -> float | None:
        """Summed over the ranks, each at its own steady rate."""
        ranks = self.parts.ranks
        return job_rate(ranks) if ranks.world > 1 else steps_rates.samples_per_s(self.parts.steps)

    @property
    def steady_tokens_per_s(self) -> float | None:
        ranks = self.parts.ranks
        return job_rate(ranks, tokens=True) if ranks.world > 1 else steps_rates.tokens_per_s(self.parts.steps)
    data_wait_fraction = _via("steps", "data_wait_fraction")
    executions_per_step = _via("steps", "executions_per_step")
    probe_drops = _via("steps", "probe_drops")
    steps_lost = _via("steps", "steps_lost")
    messages_lost = _via("steps", "messages_lost")

    def steady_quantile(self, q: float, exact: bool = False) -> float | None:
        return self.parts.steps.steady_quantile(q, exact)

    @property
    def steady_step_time_s(self) -> float | None:
        """The job's, on the one basis (core/reduce/steps.py): the slowest rank's mean step when there are many."""
        ranks = self.parts.ranks
        job = ranks.job_mean_step_s if ranks.world > 1 else None
        return job if job is not None else steps_rates.mean_step_s(self.parts.steps)

    def recent_data_wait_fraction(self, n: int = 20) -> float | None:
        return self.parts.steps.recent_data_wait_fraction(n)

    def input_verdict(self) -> str:
        return self.parts.steps.input_verdict()

    # ------------------------------------------------------------------ loss
    loss_first = _via("loss", "loss_first")
    loss_last = _via("loss", "loss_last")
    loss_history = _via("loss", "loss_history")
    steps_to_target = _via("loss", "steps_to_target")
    time_to_target_s = _via("loss", "time_to_target_s")
    loss_nonfinite = _via("loss", "loss_nonfinite")

    def script_throughput(self) -> ScriptRate | None:
        """The workload's own throughput figure beside neurondesk's steady one (None: it printed none)."""
        return self.parts.loss.script_throughput()

    # ------------------------------------------------------------------ compiles
    compiles = _via("compiles", "compiles")
    compile_open = _via("compiles", "compile_open")
    points = _via("compiles", "points")
    pending_neuron = _via("compiles", "pending_neuron")
    graph_breaks = _via("compiles", "graph_breaks")
    compile_total_s = _via("compiles", "compile_total_s")
    first_compile_s = _via("compiles", "first_compile_s")
    recompiles_after_warmup = _via("compiles", "recompiles_after_warmup")

    def open_compile_since(self) -> float | None:
        return self.parts.compiles.open_compile_since()

    # ------------------------------------------------------------------ telemetry
    inventory = _via("telemetry", "inventory")
    host = _via("telemetry", "host")
    process_tree = _via("telemetry", "process_tree")
    neuron = _via("telemetry", "neuron")
    gpu = _via("telemetry", "gpu")
    cache = _via("telemetry", "cache")
    workload_cpu_history = _via("telemetry", "workload_cpu_history")
    hw_flops_sum = _via("telemetry", "hw_flops_sum")
    hw_flops_samples = _via("telemetry", "hw_flops_samples")
    device_util_steady = _via("telemetry", "device_util_steady")
    device_util_source = _via("telemetry", "device_util_source")

    # ------------------------------------------------------------------ log
    output = _via("log", "output")
    output_total = _via("log", "output_total")
    notices = _via("log", "notices")  # a deque: the recorder appends its own notices to it
    errors = _via("log", "errors")
    parse_problems = _via("log", "parse_problems")

    # ------------------------------------------------------------------ what core/node's rules read
    def progress(self) -> Progress:
        """The hang rule's reading (core/node/hang.py)."""
        evaluation, compiles = self.parts.evaluation, self.parts.compiles.compiles
        marks = (evaluation.progress_t, compiles[-1].t if compiles else None,
                 evaluation.spans[-1][1] if evaluation.spans else None)
        return Progress(finished=self.finished, compiling=self.open_compile_since() is not None,
                        last_step_end=self.parts.steps.last_step_end,
                        other_marks=tuple(m for m in marks if m is not None),
                        steady_step_time_s=self.steady_step_time_s, hang_after_s=self.parts.run.hang_after_s,
                        steps_done=self.steps_done)

    def flight(self) -> FlightView:
        """The Flight Recorder rules' reading (core/node/flight_recorder.py)."""
        env = next((p.flight_recorder for p in self.processes.values() if p.flight_recorder), {})
        return FlightView(blocked=self.parts.procs.blocked, finished=self.finished,
                          last_step_end=self.parts.steps.last_step_end, env=tuple(dict(env).items()))

    # ------------------------------------------------------------------ words
    def phase(self, now: float | None = None) -> tuple[str, str]:
        """(phase, words) for the header and status line."""
        if self.finished:
            return "finished", f"finished (exit {self.exit_code})"
        since = self.open_compile_since()
        if since is not None:
            clock = now if now is not None else self.last_t or since
            neff = self.parts.neff.live_words(clock)  # TorchNeuron's eager NEFFs: many, counted live
            if neff is not None:
                return "compiling", neff
            return "compiling", f"compiling #{len(self.compiles) + 1} for {clock - since:.0f} s"
        hang = detect_hang(self.progress(), now)
        if hang is not None:
            return "hung", hang.words()
        if self.parts.compiles.graph_grows:
            return "compiling", "compiling every step: the graph grows (nothing cuts it)"
        if self.steps_done == 0 and not self.compiles:
            return "starting", "starting"
        recent = self.recent_data_wait_fraction()
        if recent is not None and recent >= INPUT_BOUND:
            return "input-bound", "input-bound"
        return "running", "running"
