"""summary.json as a typed contract: the structs, the version, and the reader of every version.

``Summary`` is what core/summary/build.py builds, once at the end of a run, and what every reader takes
(the writers, compare, the checks, the job summary, the index and history, the sinks); ``load_summary``
reads any summary neurondesk ever wrote (version 1 had no ``figures``), at the store boundary.
docs/summary.schema.json is generated from these structs by scripts/make_schemas.py
(tests/runs/test_summary_contract.py fails when the checked-in one is stale).

``advice`` and ``config`` stay JSON objects: advice rows carry figures of their own kind (core/findings/
advice.py) and lint adds a line to them in place; the config is what the script declared.
"""

from __future__ import annotations

from typing import Any

import msgspec

from neurondesk.core.events.job_identity import JobIdentity
from neurondesk.core.figures.goodput import Goodput
from neurondesk.core.figures.phases import StepPhases
from neurondesk.core.figures.run_figures import RunFigures
from neurondesk.core.findings.crash import Crash
from neurondesk.core.findings.memory_creep import MemoryCreep
from neurondesk.core.summary.neuron_summary import CompileSplitSection, NeuronSection

SUMMARY_VERSION = 2
READABLE_VERSIONS = (1, 2)

Obj = dict[str, Any]


class _S(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """A summary section: later versions may add fields, so unknown ones are ignored on reading."""


class Device(_S):
    kind: str | None = None
    name: str | None = None
    framework: str | None = None  # "TorchNeuron": the native neuron device (not torch_xla's)
    framework_version: str | None = None
    cores: int | None = None  # the NeuronCores it was given


class Devices(_S):
    neuron_devices: int | None = None
    neuron_cores: int | None = None
    neuron_source: str | None = None
    neuron_reason: str | None = None
    gpus: list[str] = []
    gpu_reason: str | None = None
    cpu: Obj | None = None


class RankRow(_S):
    rank: int | None
    local_rank: int | None = None
    pid: int | None = None
    steps: int = 0
    step_time_s: float | None = None  # the rank's median steady step (the straggler and culprit rules')
    mean_step_s: float | None = None  # its mean steady step: the basis of its samples/s (docs/steady-state.md)
    presync_s: float | None = None
    own_s: float | None = None  # median steady step less its wait inside collectives (core/reduce/ranks.py)
    collective_s: float | None = None  # median time a steady step spends inside collectives
    step_data_wait_s: float | None = None  # median data wait of the same steps
    data_wait_fraction: float | None = None
    samples_per_s: float | None = None
    compile_count: int = 0
    compile_total_s: float | None = None
    recompiles_after_warmup: int = 0
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    neuron_cores: list[int] = []
    neuron_utilization: float | None = None


class Straggler(_S):
    rank: int | None
    presync_s: float | None = None
    vs_median_s: float | None = None
    cause: str | None = None
    words: str = ""


class FailedRank(_S):
    rank: int | None
    pid: int | None = None
    error: str | None = None
    step: int | None = None
    traceback: list[str] = []


class SplitPoint(_S):
    trigger: str | None
    location: str | None = None
    count: int = 0
    library: str | None = None  # inside the user's line, the framework frame where the graph ran
    called_from: str | None = None  # that frame's caller in the library (another framework or file)


class GraphBreak(_S):
    reason: str | None  # what broke (torch 2.10+: the headline after its generic first line)
    location: str | None = None
    step: int | None = None
    explanation: str | None = None  # dynamo's "Explanation:" line
    hints: list[str] = []  # its "Hint:" lines (the first two)
    registry_id: str | None = None  # the graph-break registry's id, "gb0059"


class Steady(_S):
    from_step: int | None = None
    steps: int = 0
    step_time_s: float | None = None
    step_time_p90_s: float | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    rule: str = ""


class Evaluation(_S):
    phases: int
    time_s: float | None = None
    share_of_run: float | None = None
    cost_usd: float | None = None
    batches: int = 0
    samples: int = 0
    tokens: int | None = None
    compiles: int = 0


class TimeSlice(_S):
    name: str
    seconds: float
    share: float | None = None
    usd: float | None = None


class Loss(_S):
    first: float | None = None
    last: float | None = None
    target: float | None = None
    steps_to_target: int | None = None
    time_to_target_s: float | None = None
    nonfinite: int = 0


class Flops(_S):
    model_per_s: float | None = None
    hardware_per_s: float | None = None
    peak_per_s: float | None = None


class Cost(_S):
    instance_type: str | None = None
    price_per_hour: float | None = None
    price_source: str | None = None
    total_usd: float | None = None
    per_1k_steps_steady_usd: float | None = None
    per_1k_steps_all_in_usd: float | None = None
    per_million_tokens_usd: float | None = None
    compile_share: float | None = None
    projected_usd: float | None = None
    to_target_usd: float | None = None


class CompileRow(_S):
    """One compile: core/reduce/compile_record.py's ``as_dict`` and whether it came after warm-up."""

    step: int | None = None
    cause: str = ""
    location: str | None = None
    library: str | None = None  # the framework's frame inside the user's line (Trainer, Lightning ...)
    graph_hash: str | None = None
    duration_s: float | None = None
    cache: str | None = None  # "hit" | "miss" | "failed" (a failure the persistent cache kept)
    source: str = ""
    trigger: str | None = None
    input_shapes: list[list[int]] | None = None
    previous_shapes: list[list[int]] | None = None
    reason: str | None = None
    frames: list[str] = []
    ok: bool = True
    status: str = "ok"  # ok / failed / cached failure
    error: str | None = None
    name: str | None = None
    phase: str = "train"  # "train" | "eval"
    recompile: bool | None = None  # None: a summary from before phases were told apart
    graph_inputs: int | None = None
    ranks: list[int] = []  # every rank that compiled this graph
    duration_spread_s: list[float] | None = None  # [fastest, slowest] rank's, with many ranks
    cache_hit_ranks: list[int] = []
    node_count: int | None = None  # the graph's FX node count (TorchNeuron's graph_stats)
    counted: bool = True  # False: listed, its time in another compile's (not in the totals)
    count: int = 1  # compiles this row stands for: a group of TorchNeuron's eager NEFFs holds many
    graph_break: str | None = None  # the frame it compiled broke there: what, where, why
    after_warmup: bool | None = None  # None: a summary from before phases were told apart
    graphs: list[CompileSplitSection] = []  # the TorchNeuron graphs it made (forward, backward), each once


class DiagnosticRow(_S):
    """core/findings/diagnostics.py's Diagnostic."""

    kind: str
    message: str
    location: str | None = None


class ScriptThroughput(_S):
    """The script's own throughput figure beside neurondesk's steady one (core/reduce/loss.py's ScriptRate)."""

    value: float
    unit: str  # steps/s, samples/s, ms/step or s/step
    line: str = ""  # the last line a figure was read from
    printed: int = 0
    steady_value: float | None = None  # neurondesk's steady figure in the same unit
    compared_with: str | None = None
    figure: str | None = None  # "printed while steady" | "run average"
    vs_steady: float | None = None  # value / steady_value - 1
    tolerance: float = 0.1
    off: bool = False  # further apart than the tolerance


class NeuronExecutions(_S):
    """neuron-monitor's execution_stats over the run."""

    completed: int = 0
    errors: int = 0
    errors_by_status: dict[str, int] = {}
    errors_by_class: dict[str, int] = {}


class DeviceUtilization(_S):
    """Device utilisation (%) over the steady samples."""

    mean: float | None = None
    p50: float | None = None
    samples: int = 0
    source: str | None = None


class Filesystem(_S, kw_only=True):
    """One filesystem the run writes to (core/node/disk.py): free space, growth, forecast."""

    holds: list[str] = []  # "run folder", "compile cache" ...
    path: str
    free_bytes: int | None = None
    total_bytes: int | None = None
    free_share: float | None = None
    growth_bytes_per_s: float | None = None
    full_in_s: float | None = None
    full_in: str | None = None
    compile_burst_bytes: int = 0  # the run's folders' growth while compiles ran (their caches): left out of the forecast
    other_burst_bytes: int = 0  # other writes on the disk meanwhile (a shared disk): left out too
    unattributed_burst_bytes: int = 0  # used meanwhile where the run's folders were not measured
    warning: str | None = None
    words: str | None = None


class OutputNotStoredSection(_S):
    bytes: int = 0
    streams: dict[str, Obj] = {}  # stream -> lost_bytes, pending_bytes, reason, first_failed_t, storing
    words: str | None = None


class Disk(_S):
    """core/node/disk.py's DiskState: the filesystems, the workload's output the relay could not store."""

    filesystems: list[Filesystem] = []
    output_not_stored: OutputNotStoredSection | None = None
    errors: list[str] = []


class ErrorItem(_S):
    source: str | None
    message: str
    code: str | None = None
    detail: list[str] | None = None


class LeftRunning(_S):
    pid: int
    command: str


class Summary(_S):
    """The run summary (summary.json). ``figures`` holds core's figures whole; the sections before
    it (steady, cost, mfu ...) are the same values, in the shape version 1 published."""

    summary_version: int
    run_id: str | None = None
    command: list[str] = []
    started_at: str | None = None
    elapsed_s: float | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    finished: bool = False
    device: Device = msgspec.field(default_factory=Device)
    precision: str | None = None
    config: Obj | None = None
    steps: int = 0
    steps_requested: int | None = None
    warmup_steps: int | None = None
    processes: int = 0
    world_size: int = 1
    ranks: list[RankRow] = []
    stragglers: list[Straggler] = []
    failed_rank: FailedRank | None = None
    first_compile_s: float | None = None
    compile_count: int = 0
    compile_total_s: float | None = None
    compiles: list[CompileRow] = []
    recompiles_after_warmup: int = 0
    recompiles_by_phase: dict[str, int] = {}
    executions_per_step: int | None = None
    split_points: list[SplitPoint] = []
    graph_breaks: list[GraphBreak] = []
    steady: Steady = msgspec.field(default_factory=Steady)
    evaluation: Evaluation | None = None
    data_wait_fraction: float | None = None
    input_verdict: str | None = None
    input_advice: str | None = None
    diagnostics: list[DiagnosticRow] = []
    advice: list[Obj] = []  # core/findings/advice.py's Advice.as_dict(): kind, location, message and its figures
    time_breakdown: list[TimeSlice] = []
    device_utilization: DeviceUtilization | None = None
    devices: Devices | None = None
    neuron_executions: NeuronExecutions | None = None
    neuron: NeuronSection | None = None  # memory by category, HBM headroom, allocation logs, profile
    loss: Loss = msgspec.field(default_factory=Loss)
    script_throughput: ScriptThroughput | None = None
    mfu: float | None = None
    hfu: float | None = None
    mfu_note: str | None = None
    flops: Flops = msgspec.field(default_factory=Flops)
    cost: Cost = msgspec.field(default_factory=Cost)
    errors: list[ErrorItem] = []
    error_count: int = 0
    first_errors: list[ErrorItem] = []
    stderr_tail: list[str] = []
    left_running: list[LeftRunning] = []
    parse_problems: int = 0
    steps_lost: int = 0
    probe_messages_lost: int = 0
    reduce_errors: int = 0
    reduce_error_samples: list[str] = []
    notices: list[str] = []
    disk: Disk | None = None
    figures: RunFigures | None = None  # version 2 on; None in a version 1 summary
    job: JobIdentity | None = None  # the job, node and global ranks of this run (core/events/job_identity.py); None before
    step_phases: StepPhases | None = None  # the steady step by phase, with its verdict (core/figures/phases.py); None before
    crash: Crash | None = None  # how the run died: kind, finding, what to try, memory at the end (core/findings/crash.py)
    memory_creep: MemoryCreep | None = None  # memory that creeps over the steady steps (core/findings/memory_creep.py); None: none
    goodput: Goodput | None = None  # productive time / wall, badput by kind, restarts, disruptions (core/figures/goodput.py)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-shaped form (what summary.json holds), for readers that take one."""
        return msgspec.to_builtins(self)


class SummaryError(ValueError):
    """A summary that is no summary (malformed JSON, wrong types, an unknown version)."""


def load_summary(data: bytes | str | dict[str, Any]) -> Summary:
    """Any version neurondesk wrote, as a Summary; SummaryError says what is wrong with it, in one line."""
    try:
        raw = msgspec.json.decode(data) if isinstance(data, bytes | str) else data
    except msgspec.DecodeError as exc:
        raise SummaryError(f"not JSON ({_one_line(exc)})") from exc
    if not isinstance(raw, dict):
        raise SummaryError("not a JSON object")
    version = raw.get("summary_version")
    if version not in READABLE_VERSIONS:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > SUMMARY_VERSION
        why = ("a newer neurondesk wrote it: upgrade neurondesk to read it" if newer else
               "not a summary neurondesk wrote, or one from before version 1: `neurondesk summary RUN_DIR` "
               "rebuilds it from the run's journal")
        raise SummaryError(f"summary_version {repr(version)[:40]} is not one this neurondesk reads "
                           f"({', '.join(map(str, READABLE_VERSIONS))}): {why}")
    try:
        return msgspec.convert(raw, Summary, strict=False)
    except msgspec.ValidationError as exc:
        raise SummaryError(f"a field has the wrong type ({_one_line(exc)})") from exc
    except UnicodeError as exc:  # a lone surrogate Python's json let through (benchmarks/fuzz.py found it)
        raise SummaryError(f"a text that is not Unicode ({_one_line(exc)})") from exc
    except RecursionError as exc:
        raise SummaryError("nested too deep") from exc


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


def summary_schema() -> dict[str, Any]:
    """The published JSON Schema of summary.json (docs/summary.schema.json)."""
    schema = msgspec.json.schema(Summary)
    schema["title"] = "neurondesk run summary"
    schema["description"] = (f"summary.json, summary_version {SUMMARY_VERSION} "
                             f"(readers accept {', '.join(map(str, READABLE_VERSIONS))})")
    return schema
