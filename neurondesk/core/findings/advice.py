"""What to do about what happened, with the user's line and what it would save.

The shape-bucket advisor: at a compile point where input shapes changed (shape-change
recompiles), the dimension that changed and the histogram of its values over the run's steps
give candidate bucket sets (powers of two; quantiles; the best k for k = 1..4, found exactly).
Each is costed on this run's own figures: graphs compiled instead of today's count, padded tokens,
compile time saved (graphs avoided x the mean compile at that point), step time added by padding
(steady step time scaled by the padded length, i.e. step time taken as linear in that
dimension). The set that saves the most net time is proposed, in words.

Also: a tensor read inside the step (value access), a step split into several graphs, a graph
that grows every step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from neurondesk.core.findings.diagnostics import graph_grows
from neurondesk.core.findings.library_advice import what_to_do, where_in_library
from neurondesk.core.reduce.compile.compiles import CompileRecord
from neurondesk.core.reduce.state import RunState

MAX_K = 4


@dataclass(frozen=True)
class BucketPlan:
    label: str  # "powers of two", "quantiles (3)", "best 3"
    buckets: list[int]
    graphs: int
    padded_share: float  # extra tokens (or elements) over the real ones
    compile_saved_s: float
    step_time_added_s: float  # over this run's steps

    @property
    def net_saved_s(self) -> float:
        return self.compile_saved_s - self.step_time_added_s


@dataclass(frozen=True)
class Advice:
    kind: str  # "shape-buckets" | "value-access" | "graph-split" | "graph-grows"
    location: str | None
    message: str
    figures: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "location": self.location, "message": self.message, **self.figures}


def advise(state: RunState) -> list[Advice]:
    found: list[Advice] = []
    found += shape_bucket_advice(state)
    found += value_access_advice(state)
    split = graph_split_advice(state)
    if split is not None:
        found.append(split)
    grows = graph_grows(state)
    if grows is not None:
        found.append(Advice("graph-grows", grows.location, grows.message))
    return found


# ---------------------------------------------------------------- shape buckets
def shape_bucket_advice(state: RunState) -> list[Advice]:
    lead = state.lead_pid
    points: dict[str, list[CompileRecord]] = {}
    for c in state.compiles:
        if c.phase != "eval" and c.point_key and (c.pid is None or lead is None or c.pid == lead):
            points.setdefault(c.point_key, []).append(c)
    out = []
    for records in points.values():
        if any(c.cause == "shape-change" for c in records):
            advice = _bucket_advice(state, records)
            if advice is not None:
                out.append(advice)
    return out


def _changed_dim(records: list[CompileRecord]) -> int | None:
    shapes = [tuple(c.input_shapes[0]) for c in records if c.input_shapes]
    if len({len(s) for s in shapes}) != 1 or len(set(shapes)) < 2:
        return None
    distinct = [len({s[d] for s in shapes}) for d in range(len(shapes[0]))]
    best = max(range(len(distinct)), key=lambda d: distinct[d])
    return best if distinct[best] > 1 else None


def _bucket_advice(state: RunState, records: list[CompileRecord]) -> Advice | None:
    dim = _changed_dim(records)
    if dim is None:
        return None
    rank = len(records[0].input_shapes[0]) if records[0].input_shapes else 0
    counts: Counter = Counter()
    for shape, n in state.parts.steps.shape_counts.items():
        if len(shape) == rank:
            counts[shape[dim]] += n
    durations = [c.duration_s for c in records if c.duration_s]
    if len(counts) < 2 or not durations:
        return None
    mean_compile = sum(durations) / len(durations)
    unit_s = _time_per_unit(state, counts)
    plans = candidate_plans(counts, len(records), mean_compile, unit_s)
    best = max(plans, key=lambda p: p.net_saved_s)
    if best.net_saved_s <= 0 or best.graphs >= len(records):
        return None
    price = state.price_per_hour
    steps = sum(counts.values())
    usd = round(price * best.net_saved_s / 3600, 4) if price is not None else None
    per_1k = round(price * best.step_time_added_s / steps * 1000 / 3600, 4) if price is not None else None
    location = records[-1].location
    what = "the sequence length (dim 1)" if rank == 2 and dim == 1 else f"dim {dim} of the input"
    message = (f"pad {what} at {location or 'this point'} to {{{', '.join(map(str, best.buckets))}}}: "
               f"{best.graphs} graph{'s' if best.graphs != 1 else ''} instead of {len(records)}; +{best.padded_share * 100:.0f}% padded tokens; "
               f"saves {_dur(best.compile_saved_s)} of compile" + (f" (${usd:,.2f} net)" if usd is not None else "")
               + f", adds {_dur(best.step_time_added_s)} of padded steps on this run")
    return Advice("shape-buckets", location, message, {
        "dimension": dim,
        "values": {str(v): n for v, n in sorted(counts.items())},
        "graphs_today": len(records),
        "mean_compile_s": round(mean_compile, 3),
        "plans": [_plan_dict(p) for p in plans],
        "proposed": _plan_dict(best),
        "usd_saved_this_run": usd,
        "usd_padding_per_1k_steps": per_1k,
    })


def _time_per_unit(state: RunState, counts: Counter) -> float:
    """Seconds of step time per unit of the changing dimension (steady median step time over the
    most common value): padding to b instead of v costs (b - v) of these per step."""
    step = state.steady_step_time_s
    if step is None:
        times = [r.duration_s for r in state.history if not r.compiled]
        step = sorted(times)[len(times) // 2] if times else 0.0
    typical = max(counts, key=lambda v: counts[v])
    return step / typical if typical else 0.0


def candidate_plans(counts: Counter, graphs_today: int, mean_compile_s: float, unit_s: float) -> list[BucketPlan]:
    values = sorted(counts)
    sets: list[tuple[str, list[int]]] = [("powers of two", sorted({1 << (v - 1).bit_length() for v in values}))]
    expanded = [v for v in values for _ in range(counts[v])]
    for k in (2, 3, 4):
        edges = sorted({expanded[min(len(expanded) - 1, (len(expanded) * i) // k - 1)] for i in range(1, k + 1)})
        sets.append((f"quantiles ({k})", edges))
    for k in range(1, min(MAX_K, len(values)) + 1):
        sets.append((f"best {k}", best_buckets(counts, k)))
    seen, plans = set(), []
    for label, buckets in sets:
        if tuple(buckets) in seen:
            continue
        seen.add(tuple(buckets))
        plans.append(_cost(label, buckets, counts, graphs_today, mean_compile_s, unit_s))
    return plans


MAX_TOPS = 200  # candidate bucket tops the exact search considers (all distinct values up to this many)


def best_buckets(counts: Counter, k: int) -> list[int]:
    """The k bucket tops minimising the padded elements over the run (each value padded up to the
    smallest top at least as large; the largest value is always a top): exact over the candidate
    tops (every distinct value, or MAX_TOPS of them evenly spread when there are more), by
    dynamic programming with prefix sums: O(k x tops^2)."""
    values = sorted(counts)
    n = len(values)
    cum_n, cum_v = [0], [0]  # prefix sums of counts and of count x value
    for v in values:
        cum_n.append(cum_n[-1] + counts[v])
        cum_v.append(cum_v[-1] + counts[v] * v)
    step = max(1, -(-n // MAX_TOPS))
    tops = sorted({*range(n - 1, -1, -step)})  # indices into values; the largest always among them

    def pad(lo: int, hi: int) -> int:  # values[lo..hi] padded to values[hi]
        return values[hi] * (cum_n[hi + 1] - cum_n[lo]) - (cum_v[hi + 1] - cum_v[lo])

    m = len(tops)
    inf = float("inf")
    cost = [[inf] * m for _ in range(k + 1)]  # cost[b][j]: values up to tops[j] in b buckets, one topped there
    choice = [[-1] * m for _ in range(k + 1)]
    for j in range(m):
        cost[1][j] = pad(0, tops[j])
    for b in range(2, k + 1):
        for j in range(m):
            for i in range(j):
                c = cost[b - 1][i] + pad(tops[i] + 1, tops[j])
                if c < cost[b][j]:
                    cost[b][j], choice[b][j] = c, i
    b = min(range(1, k + 1), key=lambda x: (cost[x][m - 1], x))
    chosen, j = [], m - 1
    while j >= 0 and b >= 1:
        chosen.append(values[tops[j]])
        j, b = choice[b][j], b - 1
    return sorted(chosen)


def _cost(label: str, buckets: list[int], counts: Counter, graphs_today: int, mean_compile_s: float,
          unit_s: float) -> BucketPlan:
    used, padded, real = set(), 0, 0
    for v, n in counts.items():
        top = next((b for b in buckets if b >= v), max(buckets))
        used.add(top)
        padded += n * max(0, top - v)
        real += n * v
    graphs = len(used)
    return BucketPlan(label, sorted(buckets), graphs, padded / real if real else 0.0,
                      max(0, graphs_today - graphs) * mean_compile_s, padded * unit_s)


def _plan_dict(p: BucketPlan) -> dict:
    return {"label": p.label, "buckets": p.buckets, "graphs": p.graphs, "padded_share": round(p.padded_share, 4),
            "compile_saved_s": round(p.compile_saved_s, 3), "step_time_added_s": round(p.step_time_added_s, 3),
            "net_saved_s": round(p.net_saved_s, 3)}


def _dur(s: float) -> str:
    return f"{s / 60:.0f} min" if s >= 120 else f"{s:.1f} s"


# ---------------------------------------------------------------- other causes
def value_access_advice(state: RunState) -> list[Advice]:
    out = []
    for point in state.split_points.values():
        if point.trigger != "value-access" or not point.location:
            continue
        per_step = point.count / max(1, state.steps_done)
        if point.library:  # inside a library the user's call reaches: say where, and what they control
            out.append(Advice("value-access", point.location, (
                f"a tensor value is read inside the step {where_in_library(point.library, point.called_from)} "
                f"(reached from your line {point.location}; {per_step:.1f}x per step): each read runs the graph "
                f"so far; {what_to_do(point.library)}"), _lib_figures(point)))
            continue
        out.append(Advice("value-access", point.location, (
            f"a tensor value is read inside the step at {point.location} ({per_step:.1f}x per step: .item(), "
            "print, `if t:`): each read runs the graph so far. Read it after the step's sync with "
            "xm.add_step_closure(fn, args=(t,)), or log it every N steps"), {"count": point.count}))
    return out


def _lib_figures(point) -> dict:
    return {"count": point.count, "library": point.library, "called_from": point.called_from}


def graph_split_advice(state: RunState) -> Advice | None:
    execs = state.executions_per_step
    if execs is None or execs <= 1:
        return None
    splits = [p for p in state.split_points.values() if p.trigger != "value-access"]
    if not splits:
        return None
    top = max(splits, key=lambda p: p.count)
    if top.library:
        return Advice("graph-split", top.location, (
            f"each step runs {execs} graphs: a sync {where_in_library(top.library, top.called_from)} "
            f"(reached from your line {top.location}; {top.trigger}) cuts it; {what_to_do(top.library)}"),
            {"executions_per_step": execs, "library": top.library, "called_from": top.called_from})
    return Advice("graph-split", top.location, (
        f"each step runs {execs} graphs: a sync at {top.location or '?'} ({top.trigger}) cuts it; one sync at the "
        "end of the step (torch_xla.sync()) makes it one graph"), {"executions_per_step": execs})
