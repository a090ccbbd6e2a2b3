"""A run as Trace Event Format JSON (the format ui.perfetto.dev and chrome://tracing open).

Layout: one process per rank (``pid``: the rank's OS pid, named "rank N"), with threads "steps"
(one complete event per step; args step, samples, data wait, presync; the data wait nested in it
as a child span, and where the probe timed the step's phases a slice per phase after it: h2d, forward,
backward, optimizer, collective, host tracing, device wait; their durations exact, their order a step's
usual one, what none of them took left as gaps), "compiles" (cause, location, graph hash, cache) and "evaluation"; one process
"job" (pid 0) for the counters (cost so far, NeuronCore utilisation, host CPU), compiles that name
no process, the notices (global instant events) and its attempts (thread "attempts": one span per attempt
of a restarted job, and the recovery from each failure to the next attempt's first step). Each rank of
every attempt has its own process ("rank 1 (pid P, attempt 0)") and a "samples/s" counter.

Written as a stream: the journal's events are read once (``events``: an iterator the caller
gives) and nothing grows with the run but the compiles (from the reduced ``state``). Bounded
size: at most MAX_STEP_EVENTS steps per rank are drawn one by one; past that, consecutive steps
are drawn as one span per bucket ("steps 100-109": count, mean, max); counters at most
MAX_COUNTER_POINTS over the run. ``--from-step`` / ``--to-step`` select the lead's steps and the
time window they cover (compiles, evaluations, counters and notices inside it).

Timestamps: microseconds from the run's start. Complete events on one thread never overlap
partially (a span that would is moved to a lane of its own: "compiles 2"), so they nest; a step
that starts a hair (under CLAMP_S) before the previous one ended, as the probe's clock readings
put them, is drawn from that end (its exact time is in its args: duration_ms).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import TextIO

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.device_events import HostSample, NeuronSample
from neurondesk.core.figures.cost import cost_so_far
from neurondesk.core.figures.phases import LABELS, step_parts
from neurondesk.core.view.read_views import attempts_view, evaluation_spans, rank_rows
from neurondesk.reports.trace_parts import CLAMP_S, ExportRange, ExportStats, Lanes, StepBucket, finite

__all__ = ["CLAMP_S", "MAX_COUNTER_POINTS", "MAX_STEP_EVENTS", "ExportRange", "ExportStats", "TraceWriter", "write_trace"]

MAX_STEP_EVENTS = 100_000  # per rank; more steps than that are drawn in buckets
MAX_COUNTER_POINTS = 2_000  # per counter track, over the whole run
JOB_PID = 0
TID_STEPS, TID_COMPILES, TID_EVAL, TID_ATTEMPTS = 1, 10, 20, 30  # compiles 10, 11 ...: lanes for overlapping ones
PHASE_NAMES = {**LABELS, "input_wait": "data wait"}  # a step's phase slices (the input wait: "data wait", as ever)


class TraceWriter:
    def __init__(self, state, out: TextIO, rng: ExportRange | None = None) -> None:
        self.state, self.out, self.rng = state, out, rng or ExportRange()
        self.t0 = state.started_t or 0.0
        self.stats = ExportStats()
        self._first = True
        self._lanes: dict[int, Lanes] = {}
        self.attempts = attempts_view(state)
        attempts, ranks = self.attempts.attempts, rank_rows(state)
        # every attempt's ranks (a restart's ranks came back with new pids), the current one's last
        self.ranks = {pid: rank for a in attempts for rank, pid in a.ranks}
        self.ranks.update({r.pid: r.rank for r in ranks})
        self.attempt = {pid: a.number for a in attempts for _, pid in a.ranks} if len(attempts) > 1 else {}
        self.lead = state.lead_pid
        steps = {r.pid: r.steps for r in ranks} or {self.lead: state.current_step}
        most = max((self._in_range(n) for n in steps.values()), default=0)
        self.stats.bucket = max(1, math.ceil(most / MAX_STEP_EVENTS))
        span = max((state.last_t or self.t0) - self.t0, 1e-6)
        self.counter_every_s = max(span / MAX_COUNTER_POINTS, 0.05)
        self._buckets: dict[int, StepBucket] = {}
        self._rate: dict[int, list[float]] = {}  # pid -> [samples, seconds] since its last counter point
        self._last_counter: dict[str, float] = {}
        self.window: list[float | None] = [None, None]  # the lead's selected steps, start and end

    def _in_range(self, n: int) -> int:
        lo = self.rng.from_step or 0
        hi = n - 1 if self.rng.to_step is None else min(n - 1, self.rng.to_step)
        return max(0, hi - lo + 1)

    # ---------------------------------------------------------------- output
    def _emit(self, d: dict) -> None:
        try:
            text = json.dumps(d, separators=(",", ":"), allow_nan=False)
        except ValueError:  # a nan or inf among the args: JSON has none, the viewers refuse the file
            text = json.dumps(finite(d), separators=(",", ":"), allow_nan=False)
        self.out.write(("" if self._first else ",\n") + text)
        self._first = False
        self.stats.events += 1

    def _us(self, t: float) -> float:
        return round((t - self.t0) * 1e6, 3)

    def _span(self, pid: int, first_tid: int, name: str, start: float, end: float, cat: str, args: dict,
              children: list[tuple[str, float]] = ()) -> None:
        """A complete event on a lane where it nests; ``children``: (name, seconds) of spans drawn
        inside it one after the other from its start, on the same thread (cut at its end)."""
        tid, start = self._lanes.setdefault(pid, Lanes()).pick(first_tid, start, end)
        ts = self._us(start)
        dur = max(0.0, round(self._us(end) - ts, 3))  # ts + dur is the end's own timestamp: spans butt, never overlap
        self._emit({"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args})
        at = ts
        for child, seconds in children:
            inner = min(round(seconds * 1e6, 3), round(ts + dur - at, 3))
            if inner <= 0:
                continue
            kind = "data_wait" if child == "data wait" else "phase"
            self._emit({"name": child, "cat": kind, "ph": "X", "ts": at, "dur": inner, "pid": pid, "tid": tid,
                        "args": {"ms": round(seconds * 1e3, 3)} if kind == "phase" else {}})
            at = round(at + inner, 3)

    def _counter(self, pid: int, name: str, t: float, values: dict, force: bool = False) -> None:
        key = f"{pid}:{name}"
        if not force and t - self._last_counter.get(key, -math.inf) < self.counter_every_s:
            return
        if not self._in_window(t):
            return
        self._last_counter[key] = t
        self._emit({"name": name, "ph": "C", "ts": self._us(t), "pid": pid, "args": values})

    def _in_window(self, t: float) -> bool:
        lo, hi = self.window
        if self.rng.from_step is not None and (lo is None or t < lo):
            return False
        return not (self.rng.to_step is not None and hi is not None and t > hi and self._lead_past)

    # ---------------------------------------------------------------- the run
    def write(self, events: Iterable[ev.Event]) -> ExportStats:
        self._lead_past = False
        self.out.write('{"displayTimeUnit":"ms","otherData":' + json.dumps(
            {"run_id": self.state.run_id, "exporter": "neurondesk", "started_t": self.t0}) + ',"traceEvents":[\n')
        self._names()
        for e in events:
            self._event(e)
        for pid in list(self._buckets):
            self._flush_bucket(pid)
        self._compiles()
        self._evaluations()
        self._attempts()
        self.out.write("\n]}\n")
        return self.stats

    def _names(self) -> None:
        meta = [(JOB_PID, None, "process_name", "job"), (JOB_PID, None, "process_sort_index", -1),
                (JOB_PID, TID_ATTEMPTS, "thread_name", "attempts")]
        pids = sorted(self.ranks, key=lambda p: self.ranks[p]) or ([self.lead] if self.lead else [])
        for pid in pids:
            rank = self.ranks.get(pid, 0)
            attempt = f", attempt {self.attempt[pid]}" if pid in self.attempt else ""
            meta += [(pid, None, "process_name", f"rank {rank} (pid {pid}{attempt})"),
                     (pid, None, "process_sort_index", rank),
                     (pid, TID_STEPS, "thread_name", "steps"), (pid, TID_COMPILES, "thread_name", "compiles"),
                     (pid, TID_EVAL, "thread_name", "evaluation")]
        meta += [(JOB_PID, TID_COMPILES, "thread_name", "compiles (no process named)")]
        for pid, tid, name, value in meta:
            key = "sort_index" if name.endswith("sort_index") else "name"
            self._emit({"name": name, "ph": "M", "pid": pid, "tid": tid if tid is not None else 0,
                        "args": {key: value}})

    def _event(self, e: ev.Event) -> None:
        if isinstance(e, ev.StepEnded):
            self._step(e)
        elif isinstance(e, ev.StepBatch):  # a batch of plain steps, where the journal has them
            for s in e.steps():
                self._step(s)
        elif isinstance(e, ev.Notice):
            if self._in_window(e.t):
                self._emit({"name": e.message[:200], "cat": "notice", "ph": "i", "s": "g", "ts": self._us(e.t),
                            "pid": JOB_PID, "tid": 0, "args": {"level": e.level, "source": e.source,
                                                                "message": e.message}})
        elif isinstance(e, HostSample) and e.cpu_percent is not None:
            self._counter(JOB_PID, "host CPU %", e.t, {"cpu": e.cpu_percent})
        elif isinstance(e, NeuronSample):
            used = [c.utilization for c in e.cores if c.utilization is not None and c.owner_pid is not None]
            if used:
                self._counter(JOB_PID, "NeuronCore utilisation %", e.t, {"mean": sum(used) / len(used)})
        if self.state.price_per_hour is not None:
            cost = cost_so_far(self.state.price_per_hour, e.t - self.t0)
            if cost is not None:
                self._counter(JOB_PID, "cost so far (USD)", e.t, {"usd": round(cost, 6)})

    def _step(self, e: ev.StepEnded) -> None:
        pid = e.pid
        if pid not in self.ranks and pid != self.lead:
            return
        start, end = e.t - e.duration_s - e.eval_s, e.t
        if pid == self.lead:
            if self.rng.to_step is not None and e.step > self.rng.to_step:
                self._lead_past = True
            elif self.rng.holds(e.step):
                self.window[0] = start if self.window[0] is None else min(self.window[0], start)
                self.window[1] = end if self.window[1] is None else max(self.window[1], end)
        if not self.rng.holds(e.step):
            return
        self.stats.steps += 1
        self._rate_counter(e)
        if self.stats.bucket > 1:
            return self._add_to_bucket(e, start, end)
        args = {"step": e.step, "duration_ms": round(e.duration_s * 1e3, 6), "samples": e.samples, "data_wait_ms": round(e.data_wait_s * 1e3, 3),
                "presync_ms": None if e.presync_s is None else round(e.presync_s * 1e3, 3),
                "compiles": e.compiles, "executions": e.executions}
        # the wait for the batch opens the step: a child span; then the step's phases where the probe
        # timed them (core/figures/phases.py: their seconds exact, laid out in a step's usual order; other: the gaps)
        parts = step_parts(e.duration_s, e.data_wait_s, e.phases_s, e.executions is not None, self.state.device_kind)
        children = [(PHASE_NAMES.get(p.name, p.name), p.seconds) for p in parts if p.name != "other" and p.seconds > 0]
        if not parts and e.data_wait_s > 0:
            children = [("data wait", e.data_wait_s)]
        self._span(pid, TID_STEPS, f"step {e.step}", start, end, "step", args, children)

    def _rate_counter(self, e: ev.StepEnded) -> None:
        acc = self._rate.setdefault(e.pid, [0.0, 0.0])
        if e.samples is None:
            return
        acc[0] += e.samples
        acc[1] += e.duration_s
        key = f"{e.pid}:samples/s"
        if e.t - self._last_counter.get(key, -math.inf) >= self.counter_every_s and acc[1] > 0:
            self._counter(e.pid, "samples/s", e.t, {"samples_per_s": round(acc[0] / acc[1], 3)})
            acc[0] = acc[1] = 0.0

    def _add_to_bucket(self, e: ev.StepEnded, start: float, end: float) -> None:
        b = self._buckets.get(e.pid)
        if b is not None and (e.step - b.first >= self.stats.bucket or e.step < b.first):
            self._flush_bucket(e.pid)
            b = None
        if b is None:
            b = self._buckets[e.pid] = StepBucket(first=e.step, start=start)
        b.end = max(b.end, end)
        b.count += 1
        b.total_s += e.duration_s
        b.max_s = max(b.max_s, e.duration_s)
        b.wait_s += e.data_wait_s
        b.samples += e.samples or 0

    def _flush_bucket(self, pid: int) -> None:
        b = self._buckets.pop(pid, None)
        if b is None:
            return
        last = b.first + self.stats.bucket - 1
        self._span(pid, TID_STEPS, f"steps {b.first}-{last}", b.start, b.end, "steps", {
            "steps": b.count, "mean_ms": round(b.total_s / b.count * 1e3, 3), "max_ms": round(b.max_s * 1e3, 3),
            "data_wait_ms": round(b.wait_s * 1e3, 3), "samples": b.samples})

    def _compiles(self) -> None:
        for c in sorted(self.state.compiles, key=lambda c: c.t):
            dur = c.duration_s or 0.0
            if not self._in_window(c.t):
                continue
            pid = c.pid if c.pid in self.ranks or (c.pid is not None and c.pid == self.lead) else JOB_PID
            # a graph_stats compile of its own: its graph name, node count, whether it is in the totals
            self._span(pid, TID_COMPILES, f"compile #{c.index} {c.cause}", c.t - dur, c.t, "compile", {
                "cause": c.cause, "location": c.location, "graph_hash": c.graph_hash, "cache": c.cache,
                "step": c.step, "phase": c.phase, "source": c.source, "ok": c.ok, "duration_s": c.duration_s,
                "ranks": list(c.ranks), "name": c.name, "node_count": c.node_count, "counted": c.counted})

    def _evaluations(self) -> None:
        pid = self.lead if self.lead is not None else JOB_PID
        for i, (a, b) in enumerate(evaluation_spans(self.state), start=1):
            if self._in_window(b):
                self._span(pid, TID_EVAL, f"evaluation {i}", a, b, "evaluation", {})


    def _attempts(self) -> None:
        """A restarted job's attempts as spans, and each restart's recovery (core/reduce/attempts.py)."""
        attempts = self.attempts
        if not attempts.restarts:
            return
        for r in attempts.recoveries:
            a, b = r.before, r.after
            end = a.ended_t or a.started_t
            self._span(JOB_PID, TID_ATTEMPTS, f"attempt {a.number}", a.started_t, end, "attempt", {
                "reached_step": a.reached, "resumed_at": a.resumed, "failure": a.failure_error,
                "rank": a.failure_rank})
            if b.first_step_start is not None and end < b.first_step_start:
                self._span(JOB_PID, TID_ATTEMPTS, f"recovery to attempt {b.number}", end, b.first_step_start,
                           "recovery", {"steps_lost": r.steps_lost, "wasted_s": round(r.wasted_s, 3)})
        last = attempts.attempts[-1]
        self._span(JOB_PID, TID_ATTEMPTS, f"attempt {last.number}", last.started_t,
                   max(last.ended_t or last.started_t, self.state.last_t or last.started_t), "attempt", {
                       "reached_step": last.reached, "resumed_at": last.resumed,
                       "failure": last.failure_error, "rank": last.failure_rank})


def write_trace(state, events: Iterable[ev.Event], out: TextIO, rng: ExportRange | None = None) -> ExportStats:
    """``state``: the run reduced (sources/rebuild.py); ``events``: its journal, in order."""
    return TraceWriter(state, out, rng).write(events)

