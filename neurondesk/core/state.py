"""RunState: the pure reduction of a run's events.

`state.apply(event)` for every event, in journal order; the same events always give the same
state, whether they come from a live run or a replayed journal. No I/O, no clock: anything
that depends on "now" takes it as an argument.

Steady state (the README quotes this): a step is *steady* when its index is at least
`warmup_steps` (default 5) and nothing compiled during it — no compile the probe counted in the
step, and no compile event (probe, dynamo or Neuron log) attributed to it. Steady figures are
taken over the steady steps of the lead process (the first process that reported a step).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from array import array
from collections import Counter, deque
from dataclasses import dataclass, field

from neurondesk.core import device_events as dev
from neurondesk.core import events as ev

HISTORY = 2000  # steps kept for charts; aggregates cover every step
OUTPUT_KEEP = 5000  # workload output lines kept for the console's log (output_total counts all)
INPUT_WARN, INPUT_BOUND = 0.05, 0.20  # data-wait fraction thresholds


@dataclass
class StepRecord:
    step: int
    t: float
    duration_s: float
    samples: int | None
    tokens: int | None
    data_wait_s: float
    executions: int | None
    compiled: bool
    steady: bool


@dataclass
class CompileRecord:
    index: int  # 1-based, in arrival order
    t: float
    step: int | None
    source: str
    cause: str
    duration_s: float | None
    location: str | None
    graph_hash: str | None
    cache: str | None
    trigger: str | None
    input_shapes: list[list[int]] | None
    previous_shapes: list[list[int]] | None
    reason: str | None
    frames: list[str]
    ok: bool
    error: str | None

    def as_dict(self) -> dict:
        return {
            "step": self.step,
            "cause": self.cause,
            "location": self.location,
            "graph_hash": self.graph_hash,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 6),
            "cache": self.cache,
            "source": self.source,
            "trigger": self.trigger,
            "input_shapes": self.input_shapes,
            "previous_shapes": self.previous_shapes,
            "reason": self.reason,
            "frames": self.frames,
            "ok": self.ok,
            "error": self.error,
        }


@dataclass
class SplitPoint:
    trigger: str
    location: str | None
    count: int = 0


def quantile_sorted(xs, q: float) -> float | None:
    """Linear-interpolated quantile of an already sorted sequence (None when empty)."""
    if not xs:
        return None
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def quantile(values, q: float) -> float | None:
    """Linear-interpolated quantile of a sequence (None when empty)."""
    return quantile_sorted(sorted(values), q)


@dataclass
class RunState:
    run_id: str | None = None
    command: list[str] = field(default_factory=list)
    started_t: float | None = None
    last_t: float | None = None
    warmup_steps: int = 5
    target_loss: float | None = None
    samples_override: int | None = None
    tokens_override: int | None = None
    steps_requested: int | None = None
    instance_type: str | None = None
    price_per_hour: float | None = None
    price_source: str | None = None

    processes: dict[int, ev.ProcessAttached] = field(default_factory=dict)
    lead_pid: int | None = None
    step_pids: set[int] = field(default_factory=set)
    device_kind: str | None = None
    device_name: str | None = None
    precision: str | None = None
    config: dict = field(default_factory=dict)

    steps_done: int = 0
    history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    total_step_s: float = 0.0
    total_wait_s: float = 0.0
    steady_from: int | None = None
    steady_times: array = field(default_factory=lambda: array("d"))  # every steady step: exact median
    steady_total_s: float = 0.0
    _sorted: array = field(default_factory=lambda: array("d"))  # steady_times sorted, as of _sorted_n
    _sorted_n: int = 0
    steady_samples: int = 0
    steady_tokens: int = 0
    steady_samples_known: bool = True
    steady_tokens_known: bool = True
    steady_wait_s: float = 0.0
    steady_execs: Counter = field(default_factory=Counter)
    all_execs: Counter = field(default_factory=Counter)
    steps_with_compile: set[int] = field(default_factory=set)

    compiles: list[CompileRecord] = field(default_factory=list)
    compile_open: dict[tuple, float] = field(default_factory=dict)  # (source, pid) -> start t
    points: dict[str, list] = field(default_factory=dict)  # sync point -> input shapes seen there
    pending_neuron: list[ev.CompileFinished] = field(default_factory=list)
    dynamo_reasons: deque = field(default_factory=lambda: deque(maxlen=64))
    graph_breaks: list[ev.GraphBreak] = field(default_factory=list)
    split_points: dict[tuple, SplitPoint] = field(default_factory=dict)

    loss_first: float | None = None
    loss_last: float | None = None
    loss_history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    steps_to_target: int | None = None
    time_to_target_s: float | None = None  # wall seconds from the run's start to the loss line that reached it
    loss_nonfinite: int = 0  # nan / inf losses seen

    # latest telemetry samples (device & host collectors); views render these as they are
    inventory: dev.DeviceInventory | None = None
    host: dev.HostSample | None = None
    process_tree: dev.ProcessTreeSample | None = None
    neuron: dev.NeuronSample | None = None
    gpu: dev.GpuSample | None = None
    cache: dev.CacheScan | None = None
    workload_cpu_history: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    # neuron-monitor's per-core `flops` (FLOP/s, cores with an owner summed), over the samples taken
    # in steady state (a steady step seen, no compile open): the HFU numerator is their mean
    hw_flops_sum: float = 0.0
    hw_flops_samples: int = 0
    # mean device utilisation (% over the cores / GPUs this run uses), one value per steady sample
    device_util_steady: array = field(default_factory=lambda: array("d"))
    device_util_source: str | None = None

    output: deque = field(default_factory=lambda: deque(maxlen=OUTPUT_KEEP))  # latest OutputLine events
    output_total: int = 0
    notices: deque = field(default_factory=lambda: deque(maxlen=200))
    errors: list[ev.LogError] = field(default_factory=list)
    parse_problems: int = 0
    exit_code: int | None = None
    exit_signal: str | None = None
    finished: bool = False
    stderr_tail: list[str] = field(default_factory=list)
    event_count: int = 0

    # ------------------------------------------------------------------ reduce
    def apply(self, e: ev.Event) -> None:
        self.event_count += 1
        if self.started_t is None:
            self.started_t = e.t
        self.last_t = e.t if self.last_t is None else max(self.last_t, e.t)
        handler = getattr(self, "_on_" + e.kind, None)
        if handler is not None:
            handler(e)

    def _on_run_started(self, e: ev.RunStarted) -> None:
        self.run_id, self.command, self.started_t = e.run_id, list(e.command), e.t
        self.warmup_steps, self.target_loss = e.warmup_steps, e.target_loss
        self.samples_override, self.tokens_override = e.samples_per_step, e.tokens_per_step
        self.steps_requested = e.steps_requested
        self.instance_type, self.price_per_hour, self.price_source = (
            e.instance_type, e.price_per_hour, e.price_source)

    def _on_process_attached(self, e: ev.ProcessAttached) -> None:
        self.processes[e.pid] = e

    def _on_device_seen(self, e: ev.DeviceSeen) -> None:
        if self.device_kind is None or e.pid == self.lead_pid:
            self.device_kind, self.device_name = e.device_kind, e.device_name
            if e.precision:
                self.precision = e.precision

    def _on_workload_config(self, e: ev.WorkloadConfig) -> None:
        self.config.update(e.values)
        if self.steps_requested is None and isinstance(e.values.get("steps"), int):
            self.steps_requested = e.values["steps"]

    @property
    def world(self) -> int:
        return max(1, len(self.step_pids))

    @property
    def current_step(self) -> int:
        """The step in progress (the lead's next step index)."""
        return self.steps_done

    def _on_step(self, e: ev.StepEnded) -> None:
        self.step_pids.add(e.pid)
        if self.lead_pid is None:
            self.lead_pid = e.pid
        if e.pid != self.lead_pid:
            return
        samples = self.samples_override if self.samples_override is not None else e.samples
        tokens = self.tokens_override if self.tokens_override is not None else e.tokens
        compiled = e.compiles > 0 or e.step in self.steps_with_compile
        steady = e.step >= self.warmup_steps and not compiled
        self.steps_done = e.step + 1
        self.total_step_s += e.duration_s
        self.total_wait_s += e.data_wait_s
        if e.executions is not None:
            self.all_execs[e.executions] += 1
        if steady:
            if self.steady_from is None:
                self.steady_from = e.step
            self.steady_times.append(e.duration_s)
            self.steady_total_s += e.duration_s
            self.steady_wait_s += e.data_wait_s
            if samples is None:
                self.steady_samples_known = False
            else:
                self.steady_samples += samples
            if tokens is None:
                self.steady_tokens_known = False
            else:
                self.steady_tokens += tokens
            if e.executions is not None:
                self.steady_execs[e.executions] += 1
        self.history.append(StepRecord(e.step, e.t, e.duration_s, samples, tokens, e.data_wait_s,
                                       e.executions, compiled, steady))

    def _on_graph_executed(self, e: ev.GraphExecuted) -> None:
        key = (e.trigger, e.location)
        point = self.split_points.get(key)
        if point is None:
            point = self.split_points[key] = SplitPoint(e.trigger, e.location)
        point.count += 1

    def _on_compile_started(self, e: ev.CompileStarted) -> None:
        self.compile_open[(e.source, e.pid)] = e.t

    def _on_compile(self, e: ev.CompileFinished) -> None:
        started = self.compile_open.pop((e.source, e.pid), None)
        if e.source == "probe":
            self.compile_open.pop(("pt-xla-debug", e.pid), None)
        if e.source == "neuron-log" and self.processes:
            # A probe is watching: it reports this compile; the Neuron log only adds the
            # persistent-cache verdict and module hash to the probe's record.
            self._attach_neuron(e)
            return
        if e.source == "pt-xla-debug" and self.processes:
            return  # the probe reports the same compile with its duration
        duration = e.duration_s
        if duration is None and started is not None and e.cache != "hit":
            duration = max(0.0, e.t - started)
        step = e.step if e.step is not None else self.current_step
        cause, previous = self._classify(e)
        record = CompileRecord(
            index=len(self.compiles) + 1, t=e.t, step=step, source=e.source, cause=cause,
            duration_s=duration, location=e.location, graph_hash=e.graph_hash, cache=e.cache,
            trigger=e.trigger, input_shapes=e.input_shapes, previous_shapes=previous,
            reason=e.reason, frames=list(e.frames), ok=e.ok, error=e.error)
        if e.source == "dynamo" and cause != "first":
            self._pair_dynamo(record)
        if self.pending_neuron and e.source == "probe":
            neuron = self.pending_neuron.pop(0)
            record.cache = neuron.cache or record.cache
            record.graph_hash = record.graph_hash or neuron.graph_hash
        self.compiles.append(record)
        if e.pid is None or e.pid == self.lead_pid or self.lead_pid is None:
            self.steps_with_compile.add(step)

    def _classify(self, e: ev.CompileFinished) -> tuple[str, list | None]:
        """first / shape-change / new-graph / value-access, from the sync point and shapes."""
        if e.trigger == "value-access":
            return "value-access", None
        key = e.point or e.location or e.graph_hash
        if key is None:
            return ("first" if not self.compiles else "new-graph"), None
        seen = self.points.get(key)
        shapes = e.input_shapes
        if seen is None:
            self.points[key] = [shapes] if shapes is not None else []
            return "first", None
        if shapes is not None and seen and shapes not in seen:
            previous = seen[-1]
            seen.append(shapes)
            return "shape-change", previous
        if shapes is not None and not seen:
            seen.append(shapes)
        return "new-graph", None

    def _pair_dynamo(self, record: CompileRecord) -> None:
        for i, r in enumerate(self.dynamo_reasons):
            if abs(r.t - record.t) < 30:
                del self.dynamo_reasons[i]
                self._apply_dynamo_reason(record, r)
                return

    @staticmethod
    def _apply_dynamo_reason(record: CompileRecord, r: ev.DynamoRecompile) -> None:
        record.reason = r.reason
        record.location = record.location or r.location
        if "size mismatch" in r.reason or "shape" in r.reason or "stride mismatch" in r.reason:
            record.cause = "shape-change"

    def _on_dynamo_recompile(self, e: ev.DynamoRecompile) -> None:
        for record in reversed(self.compiles):
            if record.source == "dynamo" and record.cause != "first" and record.reason is None:
                if abs(record.t - e.t) < 30:
                    self._apply_dynamo_reason(record, e)
                    return
                break
        self.dynamo_reasons.append(e)

    def _attach_neuron(self, e: ev.CompileFinished) -> None:
        for record in reversed(self.compiles):
            if record.source == "probe" and abs(record.t - e.t) < 5 and record.cache in (None, "miss"):
                if e.cache:
                    record.cache = e.cache
                record.graph_hash = record.graph_hash or e.graph_hash
                return
        self.pending_neuron.append(e)

    def _on_graph_break(self, e: ev.GraphBreak) -> None:
        if e.step is None:  # from the log: the step in progress
            e = dataclasses.replace(e, step=self.current_step)
        self.graph_breaks.append(e)

    def _on_loss(self, e: ev.LossReported) -> None:
        step = e.step if e.step is not None else self.steps_done
        if self.loss_first is None:
            self.loss_first = e.value
        self.loss_last = e.value
        self.loss_history.append((step, e.value))
        if not math.isfinite(e.value):
            self.loss_nonfinite += 1
        if (self.steps_to_target is None and self.target_loss is not None
                and math.isfinite(e.value) and e.value <= self.target_loss):
            self.steps_to_target = step
            self.time_to_target_s = max(0.0, e.t - self.started_t) if self.started_t is not None else None

    def _on_device_inventory(self, e: dev.DeviceInventory) -> None:
        self.inventory = e

    def _on_host_sample(self, e: dev.HostSample) -> None:
        self.host = e

    def _on_process_tree(self, e: dev.ProcessTreeSample) -> None:
        self.process_tree = e
        self.workload_cpu_history.append((e.t, e.total_cpu_percent))

    def _sampling_steady(self) -> bool:
        """A telemetry sample counts toward steady-state figures when the last step was steady
        and no compile is open."""
        return bool(self.history) and self.history[-1].steady and not self.compile_open and not self.finished

    def _note_device_util(self, values: list[float], source: str) -> None:
        if values and self._sampling_steady():
            self.device_util_steady.append(sum(values) / len(values))
            self.device_util_source = source

    def _on_neuron_sample(self, e: dev.NeuronSample) -> None:
        self.neuron = e
        used = [c for c in e.cores if c.get("owner_pid") is not None]
        self._note_device_util([float(c["utilization"]) for c in used if c.get("utilization") is not None],
                               "neuron-monitor neuroncore_utilization")
        if self._sampling_steady():
            flops = [c["flops"] for c in e.cores if c.get("flops") is not None and c.get("owner_pid") is not None]
            if flops:
                self.hw_flops_sum += float(sum(flops))
                self.hw_flops_samples += 1

    def _on_gpu_sample(self, e: dev.GpuSample) -> None:
        self.gpu = e
        ours = {p.get("gpu") for p in e.processes}
        gpus = [g for g in e.gpus if not ours or g.get("index") in ours]
        self._note_device_util([float(g["util_gpu"]) for g in gpus if g.get("util_gpu") is not None],
                               "NVML utilization.gpu")

    def _on_cache_scan(self, e: dev.CacheScan) -> None:
        self.cache = e

    def _on_output(self, e: ev.OutputLine) -> None:
        self.output.append(e)
        self.output_total += 1

    def _on_notice(self, e: ev.Notice) -> None:
        self.notices.append(e)

    def _on_log_error(self, e: ev.LogError) -> None:
        self.errors.append(e)

    def _on_parse_problem(self, e: ev.ParseProblem) -> None:
        self.parse_problems += 1

    def _on_run_finished(self, e: ev.RunFinished) -> None:
        self.finished, self.exit_code, self.exit_signal = True, e.exit_code, e.signal
        self.stderr_tail = list(e.stderr_tail)

    # ------------------------------------------------------------------ derived
    @property
    def compile_total_s(self) -> float:
        return sum(c.duration_s or 0.0 for c in self.compiles)

    @property
    def first_compile_s(self) -> float | None:
        return self.compiles[0].duration_s if self.compiles else None

    @property
    def recompiles_after_warmup(self) -> int:
        return sum(1 for c in self.compiles if c.step is not None and c.step >= self.warmup_steps)

    def steady_quantile(self, q: float, exact: bool = False) -> float | None:
        """Quantile of the steady step times. Sorting a million steps at every screen refresh is
        too slow, so unless `exact` the sorted copy is reused until 0.1% more steps arrived (the
        summary asks for the exact one). Depends on counts only: a replay gives the same numbers."""
        n = len(self.steady_times)
        if n == 0:
            return None
        if n != self._sorted_n and (exact or n - self._sorted_n >= max(1, n // 1000)):
            # merge the new tail into the sorted copy: no list of a million float objects, so the
            # console's memory stays flat (large arrays are returned to the OS when freed)
            tail = sorted(self.steady_times[self._sorted_n:])
            self._sorted = array("d", heapq.merge(self._sorted, tail))
            self._sorted_n = n
        return quantile_sorted(self._sorted, q)

    @property
    def steady_step_time_s(self) -> float | None:
        return self.steady_quantile(0.5)

    @property
    def steady_step_time_p90_s(self) -> float | None:
        return self.steady_quantile(0.9)

    @property
    def steady_samples_per_s(self) -> float | None:
        total = self.steady_total_s
        if not self.steady_times or not self.steady_samples_known or total <= 0:
            return None
        return self.steady_samples * self.world / total

    @property
    def steady_tokens_per_s(self) -> float | None:
        total = self.steady_total_s
        if not self.steady_times or not self.steady_tokens_known or total <= 0 or not self.steady_tokens:
            return None
        return self.steady_tokens * self.world / total

    @property
    def data_wait_fraction(self) -> float | None:
        if self.steady_times:
            return self.steady_wait_s / self.steady_total_s if self.steady_total_s > 0 else None
        if self.total_step_s > 0:
            return self.total_wait_s / self.total_step_s
        return None

    def recent_data_wait_fraction(self, n: int = 20) -> float | None:
        recent = [r for r in list(self.history)[-n:] if not r.compiled]
        total = sum(r.duration_s for r in recent)
        return sum(r.data_wait_s for r in recent) / total if total > 0 else None

    @property
    def executions_per_step(self) -> int | None:
        counts = self.steady_execs or self.all_execs
        return counts.most_common(1)[0][0] if counts else None

    def input_verdict(self) -> str:
        frac = self.data_wait_fraction
        if frac is None:
            return "unknown"
        if frac >= INPUT_BOUND:
            return "input-bound"
        return "warn" if frac >= INPUT_WARN else "ok"

    def open_compile_since(self) -> float | None:
        return min(self.compile_open.values()) if self.compile_open and not self.finished else None

    def elapsed_s(self, now: float | None = None) -> float:
        if self.started_t is None:
            return 0.0
        end = self.last_t if (self.finished or now is None) else max(now, self.last_t or now)
        return max(0.0, (end or self.started_t) - self.started_t)

    def phase(self, now: float | None = None) -> tuple[str, str]:
        """(phase, words) for the header and status line."""
        if self.finished:
            return "finished", f"finished (exit {self.exit_code})"
        since = self.open_compile_since()
        if since is not None:
            wall = (now if now is not None else self.last_t or since) - since
            return "compiling", f"compiling #{len(self.compiles) + 1} for {wall:.0f} s"
        if self.steps_done == 0 and not self.compiles:
            return "starting", "starting"
        recent = self.recent_data_wait_fraction()
        if recent is not None and recent >= INPUT_BOUND:
            return "input-bound", "input-bound"
        return "running", "running"
