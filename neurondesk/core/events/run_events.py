"""Typed events: the one stream every source writes into and every view reads from.

Each event is a frozen dataclass with a ``kind`` tag. ``t`` is the wall-clock time (Unix
seconds) at which the source saw the thing happen; the core never reads the clock itself.

Every kind is listed in ``core/events/registry.py`` (device and host telemetry kinds live in
``core/events/device_events.py``); ``core/events/codec.py`` turns events into journal lines and back, checking
every field's type. This module imports neither, so core has no import loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = ""
    t: float


@dataclass(frozen=True)
class RunStarted(Event):
    """Written by the launcher before the workload starts."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    command: list[str]
    cwd: str = ""
    host: str = ""
    # the price, in journals written before PriceResolved (core/events/price_events.py) carried it
    instance_type: str | None = None
    price_per_hour: float | None = None
    price_source: str | None = None  # e.g. "table: VAN-2601 (2026-01-21), us-east-1" or "--price-per-hour"
    warmup_steps: int = 5
    target_loss: float | None = None
    samples_per_step: int | None = None  # user override
    tokens_per_step: int | None = None  # user override
    steps_requested: int | None = None
    budget_usd: float | None = None  # --budget-usd: warned at 80%, alerted at 100% (core/figures/budget.py)
    hang_after_s: float | None = None  # --hang-after: the hang threshold (core/node/hang.py)
    job_flag: str | None = None  # --job, when given (core/events/job_identity.py: the job identity)
    node_flag: str | None = None  # --node, when given
    launch_env: dict[str, str] = field(default_factory=dict)  # the recorder's launcher variables (core/events/job_identity.py)


@dataclass(frozen=True)
class ProcessAttached(Event):
    """The probe came alive inside a workload process (the launched one or a child)."""

    kind: ClassVar[str] = "process_attached"
    pid: int
    ppid: int = 0
    rank: int | None = None
    python: str = ""
    argv: list[str] = field(default_factory=list)
    torch_version: str | None = None
    torch_xla_version: str | None = None
    local_rank: int | None = None
    world_size: int | None = None
    launch_env: dict[str, str] = field(default_factory=dict)  # the launcher's variables in this process
    flight_recorder: dict[str, str] = field(default_factory=dict)  # its TORCH_FR_* / TORCH_NCCL_* variables


@dataclass(frozen=True)
class CollectiveBlocked(Event):
    """The recorder read the node's Flight Recorder dumps when the run hung: the collective a
    process group is blocked in (core/node/flight_recorder.py). Stands until a step ends after it."""

    kind: ClassVar[str] = "collective_blocked"
    op: str  # "gloo:all_reduce"
    seq: int
    group: str  # "default_pg"
    state: str = ""
    shapes: str = ""
    ranks: list[int] = field(default_factory=list)  # blocked in it
    never_entered: list[int] = field(default_factory=list)
    last: list[int] = field(default_factory=list)  # the last collective each of never_entered entered
    words: str = ""  # every group's words, as the hang notice says them


@dataclass(frozen=True)
class ProcessFailed(Event):
    """A workload process died of an uncaught exception (reported from inside it, before it exits)."""

    kind: ClassVar[str] = "process_failed"
    pid: int
    error: str  # "RuntimeError: crash requested at step 5"
    step: int | None = None
    traceback: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RankExited(Event):
    """torchrun said a rank exited with an error (its failure report: collectors/logparse/torchelastic.py),
    the only word of a rank killed by a signal (SIGKILL of the OOM killer, a segfault)."""

    kind: ClassVar[str] = "rank_exited"
    rank: int
    local_rank: int | None = None
    exit_code: int | None = None
    pid: int | None = None
    signal: str | None = None  # "SIGKILL"
    host: str = ""
    root_cause: bool = False  # torchrun's "first observed failure"


@dataclass(frozen=True)
class DeviceSeen(Event):
    """The probe saw which device the training runs on (at the first optimizer step)."""

    kind: ClassVar[str] = "device_seen"
    pid: int
    device_kind: str  # "xla-cpu" | "neuron" | "cuda" | "cpu"
    device_name: str = ""
    precision: str | None = None  # "fp32" | "bf16" | "fp16" | "bf16-autocast" ...
    framework: str | None = None  # "TorchNeuron": the native neuron device (probe's torchneuron.py)
    framework_version: str | None = None  # torch_neuronx.__version__
    cores: int | None = None  # the NeuronCores it was given (torch_neuronx.device_count())
    visible_cores: str | None = None  # NEURON_RT_VISIBLE_CORES, as set


@dataclass(frozen=True)
class StepEnded(Event):
    """One training step, measured by the probe from step boundary to step boundary."""

    kind: ClassVar[str] = "step"
    pid: int
    step: int  # 0-based index within that process
    duration_s: float
    samples: int | None = None
    tokens: int | None = None
    data_wait_s: float = 0.0
    executions: int | None = None  # graph executions in this step (XLA); None where unknown
    compiles: int = 0  # compiles the probe saw inside this step
    input_shapes: list[list[int]] | None = None
    eval_s: float = 0.0  # evaluation inside this step: not in duration_s (see EvalPhase)
    presync_s: float | None = None  # from the step's start to its first sync point (backward / optimizer / XLA sync)
    # the step's phases, host seconds (core/reduce/phases.py): h2d (batch to forward), forward, backward,
    # optimizer, sync (XLA: the wait at the device), collective (torch.distributed calls); None: not timed
    phases_s: list[float] | None = None


PHASES_PER_STEP = 6  # h2d, forward, backward, optimizer, sync, collective


def flat_phases(cols: list[list[float] | float], n: int) -> list[float]:
    """StepBatch.phase_cols (PHASES_PER_STEP columns of ``n`` values, or one value for all ``n``)
    as StepBatch.phases_s (a step's phases after another's)."""
    if len(cols) != PHASES_PER_STEP:
        raise ValueError(f"phase_cols has {len(cols)} columns, not {PHASES_PER_STEP}")
    flat = [0.0] * (PHASES_PER_STEP * n)
    for k, col in enumerate(cols):
        if isinstance(col, list):
            if len(col) != n:
                raise ValueError(f"phase_cols column {k} has {len(col)} values for a batch of {n} steps")
            flat[k::PHASES_PER_STEP] = col
        elif col:
            flat[k::PHASES_PER_STEP] = [float(col)] * n
    return flat


@dataclass(frozen=True)
class StepBatch(Event):
    """Consecutive steps of one process, in columns: the probe coalesces its steps between two
    sends into one message (one line on the socket, one decode, one journal line, one reduction
    call instead of hundreds). Exactly the StepEnded events ``steps()`` gives, in order: step
    ``step + i`` ended at ``ts[i]``, took ``duration_s[i]`` ... ``t`` is the last step's end.

    Only steps with nothing special are coalesced (no compile in the step, no evaluation inside
    it, no drop before it) and all of one batch share the same input shapes and the same set of
    fields; any other step is sent, and journaled, as a StepEnded of its own. A column that is
    None is absent from every step of the batch (``samples`` None: none of them said)."""

    kind: ClassVar[str] = "steps"
    pid: int
    step: int  # the first step's 0-based index; the others follow it one by one
    ts: list[float]
    duration_s: list[float]
    data_wait_s: list[float]
    samples: list[int] | None = None
    tokens: list[int] | None = None
    executions: list[int] | None = None
    presync_s: list[float] | None = None
    input_shapes: list[list[int]] | None = None  # every step's (the same for all of them)
    phases_s: list[float] | None = None  # PHASES_PER_STEP a step, flat, in StepEnded.phases_s's order
    # How the probe sends the phases: PHASES_PER_STEP columns of a value a step, a column the same in
    # every step (zero: no h2d on a CPU, no collective) as that one number: the training thread
    # formats fewer numbers. Made flat into phases_s when decoded, then None (the journal holds phases_s).
    phase_cols: list[list[float] | float] | None = None

    def __post_init__(self) -> None:
        if self.phase_cols is not None:
            if self.phases_s is not None:
                raise ValueError("a batch has phases_s and phase_cols: one of them at most")
            object.__setattr__(self, "phases_s", flat_phases(self.phase_cols, len(self.duration_s)))
            object.__setattr__(self, "phase_cols", None)

    def __len__(self) -> int:
        return len(self.duration_s)

    def columns_agree(self) -> bool:
        """Every column as long as ``duration_s`` (the decoder refuses a batch where not)."""
        n = len(self.duration_s)
        return all(c is None or len(c) == n for c in (self.ts, self.data_wait_s, self.samples, self.tokens,
                                                      self.executions, self.presync_s)) and (
            self.phases_s is None or len(self.phases_s) == PHASES_PER_STEP * n)

    def phases_of(self, i: int) -> list[float] | None:
        """Step ``step + i``'s phases (StepEnded.phases_s), or None."""
        p = self.phases_s
        return None if p is None else p[PHASES_PER_STEP * i:PHASES_PER_STEP * (i + 1)]

    def steps(self) -> list[StepEnded]:
        """The batch as the StepEnded events it stands for."""
        n, none = len(self.duration_s), [None] * len(self.duration_s)
        return [StepEnded(t=t, pid=self.pid, step=self.step + i, duration_s=d, data_wait_s=w,
                          samples=sa, tokens=to, executions=x, presync_s=pr, phases_s=self.phases_of(i),
                          input_shapes=[list(s) for s in self.input_shapes] if self.input_shapes is not None else None)
                for i, t, d, w, sa, to, x, pr in zip(range(n), self.ts, self.duration_s, self.data_wait_s,
                                                     self.samples or none, self.tokens or none,
                                                     self.executions or none, self.presync_s or none, strict=True)]


@dataclass(frozen=True)
class GraphExecuted(Event):
    """A device sync inside a step that was not the step's own boundary (a split point)."""

    kind: ClassVar[str] = "graph_executed"
    pid: int
    step: int
    trigger: str  # "value-access" | "sync" | "loader" | "compile-fn"
    location: str | None = None  # user file:line
    executions: int = 1
    compiles: int = 0
    library: str | None = None  # the framework's frame inside the user's line where it ran ('transformers f at x.py:N')
    called_from: str | None = None  # the framework frame that called into that file from another


@dataclass(frozen=True)
class CompileStarted(Event):
    """A compile began (for the live wall timer). Sources: probe watcher, Neuron cc-wrapper log."""

    kind: ClassVar[str] = "compile_started"
    source: str
    pid: int | None = None
    step: int | None = None
    graph_hash: str | None = None


@dataclass(frozen=True)
class CompileFinished(Event):
    """One graph compile with whatever its source could tell about it.

    ``trigger`` is what forced the sync (raw); the reducer turns trigger, point, hash and shapes
    into the user-facing ``cause`` (first / shape-change / new-graph / value-access / ...).
    """

    kind: ClassVar[str] = "compile"
    source: str  # "probe" | "neuron-log" | "pt-xla-debug" | "dynamo"
    duration_s: float | None = None
    pid: int | None = None
    step: int | None = None
    graph_hash: str | None = None
    cache: str | None = None  # "hit" | "miss" | "failed" | None
    trigger: str | None = None  # "value-access" | "sync" | "loader" | "compile-fn" | "dynamo" | ...
    point: str | None = None  # where in the step the sync happened (sync site); same point => same graph slot
    location: str | None = None  # user file:line
    input_shapes: list[list[int]] | None = None
    reason: str | None = None  # guard failure / cause string as printed
    frames: list[str] = field(default_factory=list)
    ok: bool = True
    error: str | None = None
    name: str | None = None  # the graph's name where the tool prints one ("***** Compiling unet *****")
    phase: str | None = None  # "train" | "eval" when the probe knows; recompiles are counted per phase
    graph_inputs: int | None = None  # the compiled graph's input count (torch_xla's analysis)
    library: str | None = None  # the framework frame it came from ("transformers Trainer.x at trainer.py:9")


@dataclass(frozen=True)
class EvalPhase(Event):
    """An evaluation phase of a training script (forwards under no_grad / inference_mode / eval
    mode between training steps) that ended at ``t``. Its batches, time and compiles are its own:
    none of them is counted in a training step."""

    kind: ClassVar[str] = "eval_phase"
    pid: int
    step: int  # the training step it ran in (or before)
    duration_s: float
    batches: int = 0
    samples: int = 0
    tokens: int = 0
    data_wait_s: float = 0.0
    compiles: int = 0
    executions: int = 0


@dataclass(frozen=True)
class EvalProgress(Event):
    """An evaluation phase still open makes progress: the probe says so at most once a second while
    its forwards go on (``batches`` so far), so that a long evaluation is not taken for a hang.
    Counted nowhere else: the phase's EvalPhase at its end holds its figures."""

    kind: ClassVar[str] = "eval_progress"
    pid: int
    step: int  # the training step it runs in (or before)
    batches: int = 0  # forwards of the phase so far
    duration_s: float = 0.0  # since the phase began


@dataclass(frozen=True)
class DynamoRecompile(Event):
    kind: ClassVar[str] = "dynamo_recompile"
    reason: str
    function: str | None = None
    location: str | None = None
    pid: int | None = None
    step: int | None = None


@dataclass(frozen=True)
class GraphBreak(Event):
    """A dynamo graph break (collectors/logparse/torch_logs.py): what broke (``reason``: torch 2.10+'s
    headline, not its generic first line), dynamo's explanation and hints, its graph-break registry id."""

    kind: ClassVar[str] = "graph_break"
    reason: str
    location: str | None = None
    pid: int | None = None
    step: int | None = None
    explanation: str | None = None
    hints: list[str] = field(default_factory=list)
    registry_id: str | None = None  # "gb0059": https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html


@dataclass(frozen=True)
class LossReported(Event):
    kind: ClassVar[str] = "loss"
    value: float
    step: int | None = None  # the step the workload printed, when it printed one
    source: str = "stdout"  # or the framework whose own logged value it is (transformers, lightning: the probe's)


@dataclass(frozen=True)
class ThroughputReported(Event):
    """The workload's own throughput (``rate: 18.4``, ``9.5it/s``, ``time 35.68ms``): steps/s, samples/s, ms/step or s/step."""

    kind: ClassVar[str] = "throughput"
    value: float
    unit: str
    line: str = ""  # the line it was read from, clipped
    source: str = "stdout"  # or the framework whose own logged figure it is (the probe's record)


@dataclass(frozen=True)
class WorkloadConfig(Event):
    """Configuration a workload declared (batch size, seq len, lr, seed, precision ...)."""

    kind: ClassVar[str] = "workload_config"
    values: dict[str, Any]


@dataclass(frozen=True)
class OutputLine(Event):
    kind: ClassVar[str] = "output"
    stream: str  # "stdout" | "stderr"
    text: str
    tag: str | None = None  # "compile" | "error" | "noise" | None — set by the log parsers


@dataclass(frozen=True)
class LogError(Event):
    """Something the workload printed that says it failed (traceback, compiler error ...)."""

    kind: ClassVar[str] = "log_error"
    source: str
    message: str
    code: str | None = None
    pid: int | None = None  # the process that printed it, where the line says
    detail: list[str] = field(default_factory=list)  # lines that belong to this error
    # True: not a new error, more of the latest one from the same source and pid (a consequence
    # line of a burst); the reducer adds its detail, and its code where that one had none
    continues: bool = False


@dataclass(frozen=True)
class ParseProblem(Event):
    """A line a collector could not understand. Counted, kept raw, never fatal."""

    kind: ClassVar[str] = "parse_problem"
    source: str
    raw: str
    error: str


@dataclass(frozen=True)
class Notice(Event):
    """Something neurondesk itself wants the user to know (probe disabled, tool missing ...)."""

    kind: ClassVar[str] = "notice"
    level: str  # "info" | "warn" | "error"
    message: str
    source: str = "neurondesk"


@dataclass(frozen=True)
class LeftProcess:
    """A process the workload started that was still running when the workload exited."""

    pid: int
    command: str


@dataclass(frozen=True)
class RunFinished(Event):
    """The workload's main process exited at ``t``: the run (and its bill) ends there, even when
    processes it started run on (``left_running``; their output is still taken in for a moment)."""

    kind: ClassVar[str] = "run_finished"
    exit_code: int | None
    signal: str | None = None  # e.g. "SIGINT" when neurondesk forwarded one
    stderr_tail: list[str] = field(default_factory=list)
    left_running: list[LeftProcess] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeDropped(Event):
    """The probe in process ``pid`` had to drop messages (the recorder fell behind). Counts are
    totals for that process so far, so a later one replaces an earlier one."""

    kind: ClassVar[str] = "probe_dropped"
    pid: int
    dropped: int  # messages dropped so far
    dropped_steps: int = 0  # step messages among them
    steps: int = 0  # steps the probe ended so far in that process (its own counter)


@dataclass(frozen=True)
class OutputNotStored(Event):
    """The output relay's totals for one stream so far (a later one replaces an earlier one)."""

    kind: ClassVar[str] = "output_not_stored"
    stream: str  # "stdout" | "stderr"
    lost_bytes: int  # dropped for good
    pending_bytes: int = 0  # held in memory, not yet in the file (the relay retries)
    reason: str | None = None  # "disk full (ENOSPC)", "read-only filesystem (EROFS)" ...
    first_t: float | None = None  # the first write that failed
    storing: bool = False  # writes succeed again
    final: bool = False  # the relay's last word: the pipes closed
