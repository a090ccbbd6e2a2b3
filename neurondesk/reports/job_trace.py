"""A job of many nodes as one Trace Event file (ui.perfetto.dev, chrome://tracing): a track group per node.

Each node's run is drawn by the run exporter (reports/trace_export.py's TraceWriter) with its events
remapped: the node is one process ("node trn-01 (node rank 1)", sorted by node rank), each of its ranks a
set of threads ("rank 3 · steps", "rank 3 · compiles", "rank 3 · evaluation") and its counters the
node's (cost so far, NeuronCore utilisation, host CPU, each rank's samples/s). One time axis for the
whole job: microseconds from the first node's start, on each node's own clock (a clock far off shifts
its node; `fleet` measures the skew live). The job's first failure is a global instant event.

Nodes are written one after the other, each from one pass over its journal: memory does not grow with
the job's size beyond one node's reduced state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TextIO

from neurondesk.core.events import run_events as ev
from neurondesk.core.job.job_summary import JobSummary
from neurondesk.reports.trace_export import JOB_PID, TID_COMPILES, TID_EVAL, TID_STEPS, TraceWriter
from neurondesk.reports.trace_parts import ExportRange, ExportStats

TIDS_PER_RANK = 100  # a rank's lanes: steps 1-8, compiles 10-17, evaluation 20
NODE_TID = 0  # the node's own thread: notices and compiles that name no rank


class _Out:
    """The one file every node's writer emits into: the separators and the count."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.first, self.stats = out, True, ExportStats()

    def emit(self, d: dict) -> None:
        self.out.write(("" if self.first else ",\n") + json.dumps(d, separators=(",", ":"), allow_nan=False))
        self.first = False
        self.stats.events += 1


class NodeTraceWriter(TraceWriter):
    """One node's run, as a process of the job's trace."""

    def __init__(self, state, sink: _Out, node_pid: int, node_name: str, t0: float,
                 rng: ExportRange | None = None) -> None:
        super().__init__(state, sink.out, rng)
        self.sink, self.node_pid, self.node_name, self.t0 = sink, node_pid, node_name, t0
        self.stats.events = 0

    def _emit(self, d: dict) -> None:
        pid = d.get("pid")
        if pid == JOB_PID:
            d["tid"] = NODE_TID + (d.get("tid") or 0)
        else:
            rank = self.ranks.get(pid, 0)
            if d.get("ph") == "C":
                d["name"] = f"rank {rank} {d['name']}"
            else:
                d["tid"] = (rank + 1) * TIDS_PER_RANK + (d.get("tid") or 0)
        d["pid"] = self.node_pid
        if d.get("ph") == "i":
            d["s"] = "p"  # a node's notice is its process's, not the whole trace's
        before = self.sink.stats.events
        try:
            self.sink.emit(d)
        except ValueError:  # a nan or inf among the args: the run exporter's rule
            from neurondesk.reports.trace_parts import finite

            self.sink.emit(finite(d))
        self.stats.events += self.sink.stats.events - before

    def _names(self) -> None:
        sink, pid = self.sink, self.node_pid
        sink.emit({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": self.node_name}})
        sink.emit({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        sink.emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": NODE_TID, "args": {"name": "node"}})
        sink.emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": NODE_TID + TID_COMPILES,
                   "args": {"name": "compiles (no rank named)"}})
        pids = sorted(self.ranks, key=lambda p: self.ranks[p]) or ([self.lead] if self.lead else [])
        for p in pids:
            rank = self.ranks.get(p, 0)
            base = (rank + 1) * TIDS_PER_RANK
            for tid, what in ((TID_STEPS, "steps"), (TID_COMPILES, "compiles"), (TID_EVAL, "evaluation")):
                sink.emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": base + tid,
                           "args": {"name": f"rank {rank} · {what} (pid {p})"}})
                sink.emit({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": base + tid,
                           "args": {"sort_index": base + tid}})
        self.stats.events += 4 + 6 * len(pids)

    def write_node(self, events: Iterable[ev.Event]) -> ExportStats:
        """The body of TraceWriter.write, without the file's head and tail (the job writes those)."""
        self._lead_past = False
        self._names()
        for e in events:
            self._event(e)
        for pid in list(self._buckets):
            self._flush_bucket(pid)
        self._compiles()
        self._evaluations()
        return self.stats


def node_label(node: str, node_rank: int | None) -> str:
    return f"node {node}" + (f" (node rank {node_rank})" if node_rank is not None else "")


def write_job_trace(job: JobSummary, nodes: Iterable[tuple[object, Iterable[ev.Event]]], out: TextIO,
                    rng: ExportRange | None = None) -> ExportStats:
    """``nodes``: (reduced state, its journal's events) for each of ``job.nodes``, in that order (read
    lazily: one node at a time)."""
    sink = _Out(out)
    out.write('{"displayTimeUnit":"ms","otherData":' + json.dumps(
        {"job_id": job.job_id, "nodes": len(job.nodes), "exporter": "neurondesk"}) + ',"traceEvents":[\n')
    t0 = min((n.started_t for n in job.nodes if n.started_t is not None), default=0.0)
    steps, bucket = 0, 1
    for i, ((state, events), node) in enumerate(zip(nodes, job.nodes, strict=True)):
        stats = NodeTraceWriter(state, sink, i + 1, node_label(node.node, node.node_rank), t0, rng).write_node(events)
        steps += stats.steps
        bucket = max(bucket, stats.bucket)
    f = job.first_failure
    if f is not None and f.t is not None:
        sink.emit({"name": f"failed first: {f.node} rank {f.rank}: {f.what}"[:200], "cat": "failure", "ph": "i",
                   "s": "g", "ts": round((f.t - t0) * 1e6, 3), "pid": JOB_PID, "tid": 0,
                   "args": {"node": f.node, "rank": f.rank, "what": f.what, "step": f.step, "last_line": f.last_line}})
    out.write("\n]}\n")
    sink.stats.steps, sink.stats.bucket = steps, bucket
    return sink.stats
