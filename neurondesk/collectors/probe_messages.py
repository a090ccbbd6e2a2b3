"""Turn one JSON line from the probe into a typed event.

The probe sends dicts shaped like events (it cannot import them). They go through the core's
validating codec, so a message with a field of the wrong type is refused here, with the reason,
and never reaches the reducer. Anything odd becomes a ParseProblem, never an exception. A
compile message may carry the raw PT_XLA_DEBUG analysis text its process wrote during that
compile; it is parsed here into hash, cause and frames. A ``torch_log`` message carries dynamo's
recompile and graph-break log lines (sent by the probe instead of printed on the script's
stderr); ``ProbeDecoder`` reads them with the TORCH_LOGS parser.
"""

from __future__ import annotations

import dataclasses
import math

from neurondesk.collectors.logparse.pt_xla_debug import parse_debug_block_text
from neurondesk.collectors.logparse.torch_logs import TorchLogsParser
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.checkpoint_events import CHECKPOINT_OPS, CheckpointOp, LongCollective
from neurondesk.core.events.codec import decode_known_kind, event_from_dict, loads

# The probe's own frames in torch_xla's frame lists: its package (one file before the split).
PROBE_PATH_MARKS = ("/_neurondesk_probe/", "\\_neurondesk_probe\\", "_neurondesk_probe.py")
_COMPILE_HEAD = b'{"kind":"compile",'
_TORCH_LOG_HEAD = b'{"kind":"torch_log",'
# The kinds the probe sends. The socket is the workload's to write to: any other kind (a launcher's
# run_started with its price and id, a run_finished ...) is refused, never taken as the run's own.
# torch_log: read by ProbeDecoder into dynamo events; neff_compiles, neff_cache, neuron_graph_stat, neuron_fault
# (its ops run on the CPU): TorchNeuron's; loss, throughput: a framework's own logged figures (source names it)
PROBE_KINDS = frozenset({"process_attached", "device_seen", "step", "steps", "graph_executed", "compile_started",
                         "compile", "dynamo_recompile", "graph_break", "notice", "probe_dropped",
                         "eval_phase", "eval_progress", "torch_log", "process_failed",
                         "neff_compiles", "neff_cache", "neff_log_mark", "neuron_graph_stat", "neuron_fault",
                         "neuron_device_memory",
                         "step_resumed", "checkpoint", "long_collective", "loss", "throughput"})


class RefusedKind(ValueError):
    pass


# Ranges a well-typed message must also hold (issue 24 item 4): beyond them it is absurd, refused as a
# ParseProblem ("out of range: ..."), journaled with its raw line and counted, never believed.
MAX_STEP = 10**12  # a step number or step count: a trillion steps is far past any run (and fits int64)
MAX_COUNT = 10**15  # samples, tokens, executions, compiles, batches, drops in one message
MAX_PID = 2**22  # the kernel's PID_MAX_LIMIT on 64-bit Linux
MAX_RANK = 10**6
MAX_DIM = 2**40  # one dimension of a tensor shape
MAX_PATH = 4096  # Linux's PATH_MAX
MAX_DURATION_S = 366 * 86400.0  # without a run start to measure against: a year
WALL_SLACK_S = 2.0  # clock granularity, a batch waiting in the socket
_STEPS = ("step", "steps", "dropped_steps", "finished_step")
_COUNTS = ("samples", "tokens", "executions", "compiles", "batches", "dropped", "graph_inputs", "count", "graphs",
           "disk_hits", "disk_misses", "memory_hits", "memory_misses", "node_count", "bytes",
           "evictions", "alloc_retries", "ooms", "allocated", "allocated_peak", "reserved", "reserved_peak",
           "active", "active_peak", "capacity")
_DURATIONS = ("duration_s", "data_wait_s", "after_step_s")
_RANKS = ("rank", "local_rank", "world_size")


MAX_LAUNCH_VARS = 32  # the probe sends at most its LAUNCH_VARS
MAX_FLIGHT_VARS = 8  # ... and its Flight Recorder variables (core/flight_recorder.ENV_VARS)
MAX_BATCH = 100_000  # steps in one StepBatch (the probe sends a few thousand at most)


def out_of_range(e: ev.Event, t_received: float, started_t: float | None = None) -> str | None:
    """Why a decoded probe event cannot be true, or None. ``started_t``: when the run started (its
    wall time so far bounds every duration and the event's time); None: only the fixed bounds."""
    if isinstance(e, ev.StepBatch):
        return batch_out_of_range(e, t_received, started_t)
    fields = {f.name for f in dataclasses.fields(e)}

    def value(name: str):
        return getattr(e, name) if name in fields else None

    if started_t is not None and not (started_t - WALL_SLACK_S <= e.t <= t_received + WALL_SLACK_S):
        return f"t {e.t!r} is outside the run (started {started_t:.3f}, now {t_received:.3f})"
    for name in _STEPS:
        v = value(name)
        if v is not None and not 0 <= v <= MAX_STEP:
            return f"{name} {v} is outside 0..{MAX_STEP:,}"
    for name in _COUNTS:
        v = value(name)
        if v is not None and not 0 <= v <= MAX_COUNT:
            return f"{name} {v} is outside 0..{MAX_COUNT:,}"
    wall = MAX_DURATION_S if started_t is None else max(0.0, t_received - started_t) + WALL_SLACK_S
    for name in _DURATIONS:
        v = value(name)
        if v is not None and not (math.isfinite(v) and 0 <= v <= wall):
            return f"{name} {v!r} is outside 0..{wall:,.1f} s (the run's wall time so far)"
    pid = value("pid")
    if pid is not None and not 0 < pid <= MAX_PID:
        return f"pid {pid} is outside 1..{MAX_PID:,}"
    for name in _RANKS:
        v = value(name)
        if v is not None and not 0 <= v <= MAX_RANK:
            return f"{name} {v} is outside 0..{MAX_RANK:,}"
    for shape in value("input_shapes") or []:
        if any(not 0 <= d <= MAX_DIM for d in shape):
            return f"input shape {shape[:8]} has a dimension outside 0..{MAX_DIM:,}"
    folder = value("cache_dir")
    if folder is not None and len(folder) > MAX_PATH:
        return f"cache_dir of {len(folder):,} characters is longer than a path ({MAX_PATH:,})"
    phases = value("phases_s")
    if phases is not None and (len(phases) != ev.PHASES_PER_STEP or not _phases_ok(phases, wall)):
        return f"phases_s {phases[:8]!r} is not {ev.PHASES_PER_STEP} durations in 0..{wall:,.1f} s"
    launch = value("launch_env") or {}
    if len(launch) > MAX_LAUNCH_VARS or any(len(k) > 64 or len(v) > 128 for k, v in launch.items()):
        return f"launch_env holds {len(launch)} variable(s), or a name or value too long (at most " \
               f"{MAX_LAUNCH_VARS}, names of 64 and values of 128 characters)"
    if isinstance(e, CheckpointOp) and e.op not in CHECKPOINT_OPS:
        return f"checkpoint op {e.op[:40]!r} is not one of {', '.join(CHECKPOINT_OPS)}"
    if isinstance(e, LongCollective) and not (0 < len(e.op) <= 64 and e.op.isidentifier()):
        return f"collective op {e.op[:40]!r} is not a function name"
    flight = value("flight_recorder") or {}
    if len(flight) > MAX_FLIGHT_VARS or any(len(k) > 64 or len(v) > 256 for k, v in flight.items()):
        return f"flight_recorder holds {len(flight)} variable(s), or a name or value too long (at most " \
               f"{MAX_FLIGHT_VARS}, names of 64 and values of 256 characters)"
    return None


def batch_out_of_range(b: ev.StepBatch, t_received: float, started_t: float | None) -> str | None:
    """out_of_range for a StepBatch: the same bounds as a StepEnded's, over whole columns."""
    n = len(b.duration_s)
    if not 1 <= n <= MAX_BATCH:
        return f"a batch of {n} steps is outside 1..{MAX_BATCH:,}"
    if not b.columns_agree():
        return f"the columns of a batch of {n} steps differ in length"
    if not 0 < b.pid <= MAX_PID:
        return f"pid {b.pid} is outside 1..{MAX_PID:,}"
    if not (0 <= b.step and b.step + n - 1 <= MAX_STEP):
        return f"steps {b.step}..{b.step + n - 1} are outside 0..{MAX_STEP:,}"
    lo, hi = (None, None) if started_t is None else (started_t - WALL_SLACK_S, t_received + WALL_SLACK_S)
    if lo is not None and not (all(map(math.isfinite, b.ts)) and lo <= min(b.ts) and max(b.ts) <= hi
                               and lo <= b.t <= hi):
        return f"a step time in {b.ts[0]!r}..{b.ts[-1]!r} is outside the run (started {started_t:.3f}, " \
               f"now {t_received:.3f})"
    for name in ("samples", "tokens", "executions"):
        col = getattr(b, name)
        if col is not None and not (0 <= min(col) and max(col) <= MAX_COUNT):
            return f"{name} {min(col)}..{max(col)} is outside 0..{MAX_COUNT:,}"
    wall = MAX_DURATION_S if started_t is None else max(0.0, t_received - started_t) + WALL_SLACK_S
    for name in ("duration_s", "data_wait_s"):
        col = getattr(b, name)
        if not (all(map(math.isfinite, col)) and 0 <= min(col) and max(col) <= wall):
            return f"{name} {min(col)!r}..{max(col)!r} is outside 0..{wall:,.1f} s (the run's wall time so far)"
    for shape in b.input_shapes or []:
        if any(not 0 <= d <= MAX_DIM for d in shape):
            return f"input shape {shape[:8]} has a dimension outside 0..{MAX_DIM:,}"
    if b.phases_s is not None and not _phases_ok(b.phases_s, wall):
        return f"a phase duration in phases_s is outside 0..{wall:,.1f} s"
    return None


def _phases_ok(col: list[float], wall: float) -> bool:
    return not col or (all(map(math.isfinite, col)) and 0 <= min(col) and max(col) <= wall)


def decode_probe_line(line: bytes, t_received: float) -> ev.Event:
    if not line.startswith(_COMPILE_HEAD):  # a compile may carry debug text to parse (general path)
        event = decode_known_kind(line)  # the probe writes "kind" first: straight into its type
        if event is not None and event.kind in PROBE_KINDS:
            return event
    try:
        msg = loads(line)
        if not isinstance(msg, dict) or "kind" not in msg:
            raise ValueError("not an event object")
        if msg["kind"] not in PROBE_KINDS:
            raise RefusedKind(f"kind {str(msg['kind'])[:80]!r} is not one the probe sends; refused")
        msg.setdefault("t", t_received)
        if "debug_text" in msg:
            debug_text = msg.pop("debug_text")
            if msg["kind"] == "compile" and isinstance(debug_text, str) and debug_text:
                _enrich_compile(msg, debug_text)
        return event_from_dict(msg)  # keys it does not know ("dropped_before") are ignored
    except (ValueError, KeyError, TypeError) as exc:
        raw = line.decode("utf-8", "replace").strip()
        return ev.ParseProblem(t=t_received, source="probe", raw=raw[:2000], error=f"{type(exc).__name__}: {exc}")


def _enrich_compile(msg: dict, debug_text: str) -> None:
    blocks = [b for b in parse_debug_block_text(debug_text) if b.kind == "compile"]
    if not blocks:
        return
    block = blocks[0]
    msg["graph_hash"] = msg.get("graph_hash") or block.graph_hash
    msg["graph_inputs"] = msg.get("graph_inputs") or block.n_inputs
    msg["reason"] = msg.get("reason") or block.cause
    # The probe's own sync wrapper sits in the stack torch_xla printed; it is not the user's story.
    msg["frames"] = msg.get("frames") or [f for f in block.frames if not any(m in f for m in PROBE_PATH_MARKS)]
    if not msg.get("location") and block.location:
        msg["location"] = block.location


class ProbeDecoder:
    """Decodes the probe's lines into events: one event per line, except a ``torch_log`` message,
    whose dynamo log lines become the DynamoRecompile / GraphBreak events they describe (none,
    one or several). Never raises. A well-typed message out of range (out_of_range, measured
    against ``started_t``, the run's start) becomes a ParseProblem; ``refused`` counts them."""

    def __init__(self, started_t: float | None = None) -> None:
        self.torch_logs = TorchLogsParser()
        self.started_t = started_t
        self.refused = 0
        self.steps_seen: dict[int, int] = {}  # pid -> steps accepted from it
        self.drops_told: dict[int, tuple[int, int]] = {}  # pid -> its last (dropped, dropped_steps)

    def decode(self, line: bytes, t_received: float) -> list[ev.Event]:
        if not line.startswith(_TORCH_LOG_HEAD):
            e = decode_probe_line(line, t_received)
            why = None if isinstance(e, ev.ParseProblem) else out_of_range(e, t_received, self.started_t)
            if why is None:
                self._account(e)
                return [e]
            self.refused += 1
            raw = line.decode("utf-8", "replace").strip()
            return [ev.ParseProblem(t=t_received, source="probe", raw=raw[:2000],
                                    error=f"out of range: {why}; refused")]
        try:
            msg = loads(line)
            text = msg.get("text") if isinstance(msg, dict) else None
            if not isinstance(text, str):
                raise ValueError("a torch_log message without its text")
            out: list[ev.Event] = []
            for log_line in text.splitlines():
                self.torch_logs.feed(log_line, t_received, out)
            out.extend(self.torch_logs.flush(t_received))  # one message is one whole log record
            return out
        except (ValueError, KeyError, TypeError) as exc:
            raw = line.decode("utf-8", "replace").strip()
            return [ev.ParseProblem(t=t_received, source="probe", raw=raw[:2000], error=f"{type(exc).__name__}: {exc}")]

    def _account(self, e: ev.Event) -> None:
        if isinstance(e, ev.StepBatch | ev.StepEnded):
            self.steps_seen[e.pid] = self.steps_seen.get(e.pid, 0) + (len(e) if isinstance(e, ev.StepBatch) else 1)
        elif isinstance(e, ev.ProbeDropped):
            old = self.drops_told.get(e.pid, (0, 0))
            self.drops_told[e.pid] = (max(old[0], e.dropped), max(old[1], e.dropped_steps))

    def unsent(self, counts: dict[int, int], t: float) -> list[ev.Event]:
        """At the workload's exit, once its last messages are in: for each process whose probe
        counted more steps (``counts``, its shared-memory count, collectors/probe_lifelines.py)
        than arrived or were told dropped, a ProbeDropped that counts the gap (steps, and
        steps_lost, then say it) and a notice in words. Nothing for a process that lost none."""
        out: list[ev.Event] = []
        for pid, ended in sorted(counts.items()):
            dropped, dropped_steps = self.drops_told.get(pid, (0, 0))
            gap = ended - self.steps_seen.get(pid, 0) - dropped_steps
            if gap <= 0 or not 0 < pid <= MAX_PID or ended > MAX_STEP:
                continue
            out.append(ev.ProbeDropped(t=t, pid=pid, dropped=dropped + gap, dropped_steps=dropped_steps + gap,
                                       steps=ended))
            out.append(ev.Notice(t=t, level="warn", source="probe", message=(
                f"process {pid} ended {ended:,} steps, {gap:,} of which never reached the recorder: it died before "
                "its probe sent its last batch; the steps are counted, and said lost (steps_lost)")))
        return out
