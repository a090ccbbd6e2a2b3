"""Memory that creeps, named: every memory series the run keeps (core/reduce/memory.py) through the
trend test (core/node/memory_trend.py), each leak with its rate, since when, the limit it runs into and
when, and its likely kind. Pure; read by RunFigures (core/figures/run_figures.py), which every output reads.

The limit a host leak runs into is the workload's cgroup memory limit when it has one (what is left:
the limit less what the cgroup or the workload's processes hold, whichever is more), else the
machine's available memory; the ranks of a node share it, so their rates add up in the forecast. A
NeuronCore's is its share of the device's HBM; a GPU's, its memory.
"""

from __future__ import annotations

import msgspec

from neurondesk.core.node.memory_trend import Creep
from neurondesk.core.reduce.memory import MemorySeries
from neurondesk.core.reduce.state import RunState

KIND_PER_STEP = "kept-per-step"  # grows with the steps: something keeps a little of every step
KIND_TIME = "grows-with-time"  # grows while no step ends (a thread, a cache filled in the background)
PER_STEP_MIN_STEPS = 5
# after "NeuronCore 3", "GPU 0", "neuron device 0" (TorchNeuron's allocator, per process)
MEMORY_NAMES = {"host_rss": "host RSS", "neuron": "memory", "cuda": "memory", "torchneuron": "allocated memory"}
LIKELY = {
    "host_rss": ("tensors kept across steps: the classic is the loss appended to a list without .item() or "
                 ".detach(), which keeps each step's autograd graph alive; or a history, cache or metrics list "
                 "that only grows"),
    "neuron": ("device tensors kept across steps: a list of losses or outputs not detached, or a cache on "
               "the device that only grows"),
    "cuda": ("device tensors kept across steps: a list of losses or outputs not detached (the classic: the "
             "loss without .item()), or a cache on the device that only grows"),
    "torchneuron": ("device tensors kept across steps: a list of losses or outputs not detached (the loss "
                    "without .item()), or a cache on the device that only grows"),
}


class MemoryLeak(msgspec.Struct, frozen=True, kw_only=True):
    """One memory series that creeps over the steady steps."""

    memory: str  # "host_rss" | "neuron" (a NeuronCore's memory) | "cuda" (a process's memory on a GPU) | "torchneuron"
    rank: int | None = None
    pid: int | None = None
    device: str | None = None  # "NeuronCore 3", "GPU 0"; None for host RSS
    category: str | None = None  # Neuron: the category that grew most ("tensors")
    bytes_per_hour: float  # the robust slope (Theil-Sen)
    bytes_per_step: float | None = None
    since_step: int | None = None  # the rank's step where the window the trend holds over starts
    since_s: float  # seconds into the run it starts
    window_s: float  # seconds the trend holds over
    samples: int
    start_bytes: int  # the fitted value at the window's start, and now
    now_bytes: int
    z: float  # the Mann-Kendall statistic, in standard deviations
    limit: str | None = None  # "cgroup memory limit" | "host memory available" | "HBM share" | "GPU memory"
    limit_bytes: int | None = None
    left_bytes: int | None = None
    hours_to_limit: float | None = None  # at this pace (host: every creeping rank's rates added)
    kind: str  # KIND_PER_STEP | KIND_TIME
    likely: str  # the likely cause, in words
    script: str | None = None  # the rank's script: `neurondesk lint` may find the line
    location: str | None = None  # "path:line" of a list append of a tensor, where lint finds one (the CLI adds it)
    headline: str  # "rank 3 host RSS +180 MiB an hour since step 2,000, its limit in about 9 h"
    words: str  # the headline with the limit and the likely kind


class MemoryCreep(msgspec.Struct, frozen=True, kw_only=True):
    leaks: list[MemoryLeak]  # the fastest first
    series: int  # memory series tested
    short: str  # one line: the fastest leak's headline (and how many more)
    words: str  # the fastest leak's words (and how many more)


def size_text(n: float) -> str:
    n = abs(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:.0f} {unit}"
    return f"{n:.0f} B"


def hours_text(h: float) -> str:
    if h < 1:
        return f"{max(1.0, h * 60):.0f} min"
    return f"{h:.1f} h" if h < 10 else f"{h:.0f} h"


def _label(s: MemorySeries) -> str | None:
    if s.device is None:
        return None
    if s.what == "torchneuron":
        return f"neuron device {s.device}"
    return f"NeuronCore {s.device}" if s.what == "neuron" else f"GPU {s.device}"


def _category(s: MemorySeries, c: Creep) -> str | None:
    if not s.categories or len(s.categories) != len(s.ys):
        return None
    first, last = s.categories[c.start], s.categories[-1]
    grew = {k: v - first.get(k, 0) for k, v in last.items()}
    best = max(grew, key=lambda k: grew[k], default=None)
    return best if best is not None and grew[best] > 0 else None


def _script(state: RunState, pid: int | None) -> str | None:
    mem = state.parts.memory
    argv = mem.argv.get(pid) if pid is not None else None
    if not argv:
        argv = next(iter(mem.argv.values()), None)
    script = next((a for a in (argv or [])[:2] if a.endswith(".py")), None)
    if script is None or script.startswith("/") or not mem.cwd:
        return script
    return f"{mem.cwd.rstrip('/')}/{script.removeprefix('./')}"


def _room(state: RunState, s: MemorySeries) -> tuple[str | None, int | None, int | None]:
    """(the limit's name, its bytes, what is left of it)."""
    mem = state.parts.memory
    if s.what == "host_rss":
        if mem.limit is not None:
            used = max(mem.limit.used_bytes or 0, mem.tree_rss or 0)
            return "cgroup memory limit", mem.limit.limit_bytes, max(0, mem.limit.limit_bytes - used)
        if mem.host_available is not None:
            return "host memory available", None, mem.host_available
        return None, None, None
    if s.what == "neuron":
        cap = state.parts.telemetry.core_capacity(s.device)
        return ("HBM share", cap, max(0, cap - int(s.ys[-1]))) if cap else (None, None, None)
    if s.what == "torchneuron":  # the capacity torch.accelerator.get_memory_info gave, where it did
        r = mem.torchneuron.by_pid.get(s.pid) if mem.torchneuron is not None and s.pid is not None else None
        cap = r.capacity if r is not None else None
        held = max(int(s.ys[-1]), r.reserved or 0) if r is not None else int(s.ys[-1])
        return ("device memory", cap, max(0, cap - held)) if cap else (None, None, None)
    room = mem.gpu_room.get(s.device) if isinstance(s.device, int) else None
    return ("GPU memory", room[0], max(0, room[0] - room[1])) if room else (None, None, None)


def _leak(state: RunState, s: MemorySeries, c: Creep) -> MemoryLeak:
    steps = s.steps[c.start:]
    first_step, last_step = steps[0], steps[-1]
    per_step = kind = None
    if first_step is not None and last_step is not None and last_step - first_step >= PER_STEP_MIN_STEPS:
        per_step, kind = (c.last - c.first) / (last_step - first_step), KIND_PER_STEP
    limit, limit_bytes, left = _room(state, s)
    started = state.started_t if state.started_t is not None else s.ts[0]
    return MemoryLeak(
        memory=s.what, rank=state.parts.memory.rank_of(s.pid), pid=s.pid, device=_label(s),
        category=_category(s, c) if s.what == "neuron" else None,
        bytes_per_hour=round(c.slope_per_s * 3600.0, 1), bytes_per_step=None if per_step is None else round(per_step, 1),
        since_step=first_step, since_s=round(s.ts[c.start] - started, 3), window_s=round(c.span_s, 3),
        samples=c.samples, start_bytes=int(c.first), now_bytes=int(c.last), z=round(c.z, 2),
        limit=limit, limit_bytes=limit_bytes, left_bytes=left, kind=kind or KIND_TIME,
        likely=LIKELY[s.what] if kind else "it grows while no step ends: a thread, a background cache or a queue",
        script=_script(state, s.pid), headline="", words="")


def _with_words(x: MemoryLeak, host_rate: float) -> MemoryLeak:
    owner = f"rank {x.rank}" if x.rank is not None else f"pid {x.pid}" if x.pid is not None else None
    who = " ".join(p for p in (owner, x.device, MEMORY_NAMES[x.memory]) if p)
    cat = f" ({x.category})" if x.category else ""
    since = f"since step {x.since_step:,}" if x.since_step is not None else f"over the last {hours_text(x.window_s / 3600)}"
    per = f", {size_text(x.bytes_per_step)} a step" if x.bytes_per_step else ""
    words = headline = f"{who}{cat} +{size_text(x.bytes_per_hour)} an hour {since}"
    words += per
    rate = host_rate if x.memory == "host_rss" else x.bytes_per_hour
    hours = x.left_bytes / rate if x.left_bytes is not None and rate > 0 else None
    if hours is not None and x.limit is not None:
        host = x.limit == "host memory available"
        room = (f"the cgroup's memory limit ({size_text(x.limit_bytes or 0)}, {size_text(x.left_bytes or 0)} left)"
                if x.limit == "cgroup memory limit" else
                f"the host's available memory ({size_text(x.left_bytes or 0)})" if host
                else f"{x.device}'s {'memory' if x.memory in ('cuda', 'torchneuron') else x.limit} "
                     f"({size_text(x.left_bytes or 0)} left)")
        words += f": at this pace {room} is {'used up' if host else 'reached'} in about {hours_text(hours)}"
        reached = ("host memory used up" if host else "the cgroup's limit reached" if x.limit == "cgroup memory limit"
                   else "its limit reached")
        headline += f", {reached} in about {hours_text(hours)}"
    words += f"; likely {x.likely}"
    return msgspec.structs.replace(x, words=words, headline=headline,
                                   hours_to_limit=None if hours is None else round(hours, 3))


def memory_creep(state: RunState) -> MemoryCreep | None:
    """The leaks found, the fastest first; None when no series creeps."""
    series = list(state.parts.memory.series.values())
    found = [_leak(state, s, c) for s in series if (c := s.creep(exact=state.finished)) is not None]
    if not found:
        return None
    host_rate = sum(x.bytes_per_hour for x in found if x.memory == "host_rss")
    leaks = sorted((_with_words(x, host_rate) for x in found), key=lambda x: -x.bytes_per_hour)
    more = f" (and {len(leaks) - 1} more)" if len(leaks) > 1 else ""
    return MemoryCreep(leaks=leaks, series=len(series), short=f"memory creeps: {leaks[0].headline}{more}",
                       words=f"memory creeps: {leaks[0].words}{more}")
