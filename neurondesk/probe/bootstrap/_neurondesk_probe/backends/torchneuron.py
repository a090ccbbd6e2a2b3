"""TorchNeuron (torch-neuronx 2.13+: the native ``neuron`` device): the probe's half of the one
TorchNeuron adapter. Every TorchNeuron name used here is cited, with the Neuron docs page and
version it was read from, in neurondesk/collectors/torchneuron.py (the recorder's half: the NEFF
cache log) and docs/torchneuron.md.

- the device: ``neuron``, torch-neuronx's version and the NeuronCores it was given, said with the
  device (devices.py asks ``device_facts``);
- eager NEFF compiles, as TorchNeuron counts and times them (its metrics,
  ``CompilationCache.TotalCompilations`` and ``CompilationCache.CompilationTime``): the step clock
  calls ``at_step_end`` at every step end, which reads one counter and does more only when it
  moved; the step's compiles go out as one ``neff_compiles`` message (a group, never one per NEFF);
- the cache's counters (``CompilationCache.InMemoryHits`` ... ``PersistentMisses``) at the end of
  the first step and at exit (``neff_cache``);
- torch.compile graphs: ``torch._dynamo.utils.counters["neuron"]`` read at the end of each dynamo
  compile and ``torch_neuronx.get_dynamo_metrics()`` (it synchronizes) only when that count moved,
  and once more at exit: never per step. Each record goes out as a ``neuron_graph_stat`` message,
  the event graph_stats tables make, keyed by graph_id (the reducer joins both to the dynamo compile);
- device memory (issue 52 item 3): ``torch_neuronx.memory.memory_stats()`` (torch_neuronx/memory.py, a
  call into ``_C._get_memory_stats``), else ``torch.accelerator.memory_stats()`` (Neuron 2.34+), and the
  device's capacity from ``torch.accelerator.get_memory_info()``: at a step end at most once in 10 s
  (``MEMORY_EVERY_NS``) and at exit (a failure's too), never synchronizing; a ``neuron_device_memory``
  message. A read that raises turns the reading off, said once (backends/torchneuron_memory.py);
- eager ops that ran on the CPU: ``torch_neuronx.get_fallback_ops()`` (torch-neuronx's op tracking,
  as published with its source; not in the docs pages read), once at exit, each op a ``neuron_fault``
  message of fault "cpu-fallback" (at most FALLBACK_OPS_SENT).

A torch.compile graph's NEFF goes through the same compilation cache as an eager op's: the NEFFs
of graphs (counted in ``counters["neuron"]``) are taken out of a step's eager count, and their
compile seconds (from get_dynamo_metrics) out of its time, so that nothing is counted twice.
"""

from __future__ import annotations

import importlib
import os
import stat
import sys
import time
from collections import deque

from .torchneuron_graphs import GraphReads
from .torchneuron_graphs import number as _number
from .torchneuron_memory import DeviceMemoryReader

# torch-neuronx's source (docs/torchneuron.md, "What torch-neuronx's own source says"):
# csrc/core/compilation/CompilationCache.cpp : CompileAndCache counts TOTAL after each compile and
# adds a TIME sample (csrc/core/metrics/NeuronMetrics.h : TORCH_NEURONX_TIME_METRIC, nanoseconds,
# stamped at the compile's end on steady_clock); NeuronBindings.cpp : _neuron_metric_data returns
# {accumulator, total_samples, repr, samples: [{timestamp_ns, value}]}, _neuron_counter_value an int or None
TOTAL = "CompilationCache.TotalCompilations"
TIME = "CompilationCache.CompilationTime"  # a timed metric: its accumulator in nanoseconds
CACHE = (("memory_hits", "CompilationCache.InMemoryHits"), ("memory_misses", "CompilationCache.InMemoryMisses"),
         ("disk_hits", "CompilationCache.PersistentHits"), ("disk_misses", "CompilationCache.PersistentMisses"),
         # CompilationCache.cpp : CheckAndEvictIfNeeded counts each NEFF the in-memory cache drops
         # (bounded by NEURON_COMPILATION_CACHE_MAX_ENTRIES / _MAX_SIZE_MB): a shape that comes back reloads or recompiles
         ("evictions", "CompilationCache.Evictions"))
FALLBACK_OPS_SENT = 20
STEP_ENDS_KEPT = 64  # step ends kept to place a compile the pipeline finished steps later
# a compile that began within 50 ms of the last one's end waited behind it in the same queue (the
# double's worker shares the GIL: its gaps are milliseconds; a real neuronx-cc compile takes seconds)
CHAIN_GAP_NS = 50_000_000
# what this adapter calls (torch_neuronx/metrics.py: each a call into torch_neuronx._C)
METRICS_CALLS = ("is_enabled", "get_counter_value", "get_metric_data")


def _regular_file(path: str | None) -> str | None:
    """``path`` when it names a regular file or nothing yet (never a FIFO or a device: stat opens nothing)."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return path  # TorchNeuron creates it at its first line
    return path if stat.S_ISREG(st.st_mode) else None


def _cache_dir() -> str | None:
    """The persistent NEFF cache folder this process compiles into (as collectors/torchneuron.py
    neff_cache_dir: either spelling of the off switch, else TORCH_NEURONX_NEFF_CACHE_DIR or its default),
    its real path; None when the cache is off."""
    env = os.environ
    if any(env.get(n, "").strip().lower() in ("1", "true", "yes")
           for n in ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE")):
        return None
    return os.path.realpath(env.get("TORCH_NEURONX_NEFF_CACHE_DIR") or "/tmp/neff_cache")


class CompilePlacer:
    """Where each NEFF compile belongs when TorchNeuron's pipeline finishes it after the step that
    caused it (issue 52): the step ends on the metrics' clock, and the CompilationTime samples placed."""

    def __init__(self, probe) -> None:
        self.probe = probe
        self.ends: deque = deque(maxlen=STEP_ENDS_KEPT)  # (step, its end in monotonic ns, its batch dims)
        self.sample_end_ns = 0  # the newest CompilationTime sample placed, and where its chain went
        self.chain_step: int | None = None

    def place(self, samples, new: int) -> dict:
        """{step: [count, seconds, batch dims, the step it finished in, seconds past its step's end]} of the
        CompilationTime samples newer than the last
        placed (at most ``new``). Each sample is stamped at its compile's end with its length: a
        compile began at the stamp less the length; one that began as the one before it ended waited
        behind it in the pipeline's queue (unless a step ended in between: the synchronous case, the
        next step's first compile), so it belongs where that chain began: the step in progress then
        (the first kept step end after it; none: this step)."""
        if not isinstance(samples, list) or not new:
            return {}
        fresh = [(s.get("timestamp_ns"), s.get("value")) for s in samples[-new:] if isinstance(s, dict)]
        fresh = [(int(ts), float(v)) for ts, v in fresh if _number(ts) is not None and _number(v) is not None
                 and ts > self.sample_end_ns]
        placed: dict = {}
        last_end: dict = {}  # step -> the latest end of its placed compiles
        for ts, value in fresh:
            began = ts - value
            queued = began <= self.sample_end_ns + CHAIN_GAP_NS and not any(
                self.sample_end_ns < end <= began for _, end, _ in self.ends)  # no step ended in between
            if self.chain_step is None or not queued:
                self.chain_step = next((s for s, end, _ in self.ends if end >= began), self.probe.clock.step)
            self.sample_end_ns = ts
            row = placed.setdefault(self.chain_step, [0, 0.0, None, None, None])
            row[0] += 1
            row[1] += value / 1e9
            last_end[self.chain_step] = max(last_end.get(self.chain_step, 0), ts)
        for step, row in placed.items():
            ended, row[2] = next(((end, dims) for s, end, dims in self.ends if s == step), (None, None))
            # a chain that ran past its step's end: the step it finished in waited for it (the step ending now
            # when no kept step end is after it)
            last = last_end[step]
            if ended is not None and last > ended:
                row[3] = next((s for s, end, _ in self.ends if end >= last), self.probe.clock.step)
                row[4] = (last - ended) / 1e9
        return placed


class TorchNeuronHooks:
    NAME = "torchneuron"
    PATCHES = (("torch_neuronx", "patch_torch_neuronx", "torchneuron"),)

    def __init__(self, probe) -> None:
        self.probe = probe
        self.module = None  # torch_neuronx, once the user imported it
        self.metrics = None  # torch_neuronx.metrics, when its collection is on
        self.compiles_seen = 0  # TotalCompilations as of the last report
        self.time_seen_ns = 0.0
        self.graphs_seen = 0  # counters["neuron"]["compiled_graphs"] as of the last step report
        self.graph_s_taken = 0.0  # the graphs' compile seconds (graphs.graph_s) already taken out of a step's eager time
        self.cache_said = False
        self.placer = CompilePlacer(probe)
        self.log_path: str | None = None  # TORCH_NEURONX_LOG_FILE, marked at step ends while the metrics cannot count
        self.log_size = -1
        self.memory = DeviceMemoryReader(probe, self)
        self.graphs = GraphReads(probe, self)  # its torch.compile graphs (torchneuron_graphs.py)

    # ------------------------------------------------------------------ import
    def patch_torch_neuronx(self, module) -> None:
        """torch_neuronx was imported: its metrics module, when collection is on (the launcher
        asks for it with TORCH_NEURONX_METRICS_ENABLED=1 unless the user set it) and it has the
        functions read here. Otherwise the NEFF cache log counts the compiles: the step clock then
        marks the log's size at each step end where it grew (``at_step_end_log``)."""
        self.module = module
        why = None
        try:
            metrics = importlib.import_module("torch_neuronx.metrics")
        except Exception as exc:  # noqa: BLE001 - a torch-neuronx without it: said below
            metrics, why = None, f"torch_neuronx.metrics cannot be imported ({type(exc).__name__})"
        if metrics is not None:
            lacking = [name for name in METRICS_CALLS if not callable(getattr(metrics, name, None))]
            if lacking:
                why = f"torch_neuronx.metrics has no {', '.join(lacking)} (another torch-neuronx version?)"
            elif not metrics.is_enabled():
                why = ("TORCH_NEURONX_METRICS_ENABLED is "
                       f"{os.environ.get('TORCH_NEURONX_METRICS_ENABLED', 'unset')!r}: collection is off")
        if why is None:
            self.metrics = metrics
            self.probe.clock.neff = self.at_step_end
            return
        self.metrics_off(why)

    def metrics_off(self, why: str) -> None:
        """TorchNeuron's metrics cannot count compiles: said once, and the log's size marked instead."""
        self.metrics = None
        self.log_path = _regular_file(os.environ.get("TORCH_NEURONX_LOG_FILE"))
        self.probe.clock.neff = self.at_step_end_log if self.log_path else None
        source = ("NEFF compiles are counted from TorchNeuron's NEFF cache log (their seconds unknown)"
                  if self.log_path else "no NEFF cache log is read either: NEFF compiles are not counted")
        self.probe.send({"kind": "notice", "level": "warn", "source": "torchneuron",
                         "message": f"TorchNeuron's metrics cannot be read ({why}): {source}"})

    def device_facts(self) -> dict:
        """What device_seen says of TorchNeuron: its name, version and NeuronCores."""
        module = self.module
        cores = None
        try:
            cores = int(module.device_count())
        except Exception:  # noqa: BLE001
            pass
        return {"framework": "TorchNeuron", "framework_version": getattr(module, "__version__", None),
                "cores": cores, "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES")}

    # ------------------------------------------------------------------ eager NEFFs
    def at_step_end(self) -> None:
        """Every step end (steps.StepClock.end_step): one counter read; a report only when it moved.
        The step's end on the metrics' clock is kept (a few steps): the pipeline's compiles are placed
        at the step in progress when they began (``place``)."""
        clock = self.probe.clock
        now = time.monotonic_ns()
        self.placer.ends.append((clock.step, now, clock.train_dims))
        if now >= self.memory.next_ns:
            self.memory.read("step", now)
        total = self.metrics.get_counter_value(TOTAL)
        if total is None:  # a counter not created yet: nothing compiled
            total = 0
        elif type(total) is not int:  # noqa: E721 - not the documented counter: the log counts instead
            self.metrics_off(f"get_counter_value({TOTAL!r}) returned {type(total).__name__}, not a count")
            return
        if total != self.compiles_seen:
            self.report_compiles(total)
        if not self.cache_said:
            self.cache_said = True
            self.send_cache(at_exit=False)

    def at_step_end_log(self) -> None:
        """Every step end while the metrics cannot count: one stat of TorchNeuron's log file; a mark
        of its size when it grew (its MISS lines up to there were written in this step or before)."""
        now = time.monotonic_ns()
        if now >= self.memory.next_ns:
            self.memory.read("step", now)
        try:
            size = os.stat(self.log_path).st_size
        except OSError:  # not written yet (or removed): nothing to mark
            return
        if size != self.log_size:
            self.log_size = size
            probe = self.probe
            probe.send({"kind": "neff_log_mark", "step": probe.clock.step, "size": size, "phase": probe.phase.name,
                        "input_shapes": probe.phase.shapes()})

    def report_compiles(self, total: int) -> None:
        """The compiles since the last report, one ``neff_compiles`` message per step they belong to:
        placed by their CompilationTime samples where those are there, else all at this step."""
        probe = self.probe
        new, self.compiles_seen = total - self.compiles_seen, total
        data = self.metrics.get_metric_data(TIME) or {}
        acc = _number(data.get("accumulator")) if isinstance(data, dict) else None
        seconds = None
        if acc is not None:
            seconds, self.time_seen_ns = max(0.0, (acc - self.time_seen_ns) / 1e9), acc
        placed = self.placer.place(data.get("samples") if isinstance(data, dict) else None, new)
        step = probe.clock.step
        here = new - sum(row[0] for row in placed.values())
        if placed:  # the samples' seconds, by step; what they do not cover, here with the rest
            seconds = None if seconds is None else max(0.0, seconds - sum(row[1] for row in placed.values()))
        graphs = self.graph_neffs()
        graph_s, self.graph_s_taken = self.graphs.graph_s - self.graph_s_taken, self.graphs.graph_s
        for at in sorted(placed):
            if at == step:
                continue
            count, secs, dims, finished, after = placed[at]
            self.send_group(at, count, secs, 0, [dims] if dims else None, now=False, finished=(finished, after))
        if step in placed:
            count, secs = placed[step][:2]
            here += count
            seconds = secs if seconds is None else seconds + secs
        eager = max(0, here - graphs)
        if seconds is not None:
            seconds = max(0.0, seconds - graph_s)
        if eager or graphs or not placed:
            self.send_group(step, eager, seconds, graphs, probe.phase.shapes())

    def send_group(self, step: int, eager: int, seconds, graphs: int, shapes, now: bool = True,
                   finished: tuple = (None, None)) -> None:
        """One ``neff_compiles``; ``now``: of the step ending (it is marked as one that compiled);
        ``finished``: (the step the pipeline finished them in, seconds past their own step's end), when later."""
        probe = self.probe
        if eager and now:
            probe.phase.count_compiles(eager)
        cache = self.cache_counts()
        msg = {"kind": "neff_compiles", "step": step, "count": eager, "duration_s": seconds,
               "graphs": graphs, "phase": probe.phase.name, "input_shapes": shapes,
               "disk_hits": cache.get("disk_hits"), "disk_misses": cache.get("disk_misses")}
        if finished[0] is not None:
            msg["finished_step"], msg["after_step_s"] = finished[0], round(finished[1], 6)
        probe.send(msg)

    def graph_neffs(self) -> int:
        """NEFFs of torch.compile graphs since the last report (counters["neuron"]; 0 without dynamo)."""
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return 0
        now = int(utils.counters["neuron"]["compiled_graphs"])
        new, self.graphs_seen = max(0, now - self.graphs_seen), now
        return new

    def cache_counts(self) -> dict:
        get = self.metrics.get_counter_value
        return {name: get(counter) for name, counter in CACHE}

    def send_cache(self, at_exit: bool) -> None:
        data = self.metrics.get_metric_data(TIME) or {}
        acc = _number(data.get("accumulator")) if isinstance(data, dict) else None
        self.probe.send({"kind": "neff_cache", "step": self.probe.clock.step, "at_exit": at_exit,
                         "compiles": self.metrics.get_counter_value(TOTAL) or 0,
                         "compile_s": None if acc is None else acc / 1e9, "cache_dir": _cache_dir(),
                         **self.cache_counts()})

    # ------------------------------------------------------------------ exit
    def at_exit(self) -> None:
        """Compiles after the last step end (an evaluation, the tail), the graphs' last records,
        the cache's totals."""
        if self.module is None:
            return
        self.probe.guarded(self.memory.read, "exit", hook="torchneuron-memory")  # a failure's memory too
        if self.metrics is None and self.log_path:  # the log's lines after the last step end
            self.probe.guarded(self.at_step_end_log, hook="torchneuron-log")
        if self.graphs.count_read:  # torch.compile made graphs: their compile times, now known
            self.probe.guarded(self.graphs.read_graphs, hook="torchneuron-graphs")
        if self.metrics is not None:
            total = self.metrics.get_counter_value(TOTAL) or 0
            if total != self.compiles_seen:
                self.report_compiles(total)
            self.send_cache(at_exit=True)
        self.probe.guarded(self.send_fallback_ops, hook="torchneuron-fallback-ops")

    def send_fallback_ops(self) -> None:
        """The eager ops TorchNeuron ran on the CPU (a list of names, or a dict of name to count)."""
        get = getattr(self.module, "get_fallback_ops", None)
        if not callable(get):
            return
        ops = get()
        names = list(ops) if isinstance(ops, (dict, list, tuple, set, frozenset)) else []
        for name in sorted(str(n) for n in names)[:FALLBACK_OPS_SENT]:
            told = f" ({ops[name]} times)" if isinstance(ops, dict) and isinstance(ops.get(name), int) else ""
            self.probe.send({"kind": "neuron_fault", "fault": "cpu-fallback", "detail": name[:200],
                             "line": f"torch_neuronx.get_fallback_ops(): {name[:200]}{told}"})
