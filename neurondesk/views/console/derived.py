"""Small read-only views of RunState that the panels share.

These only select and reshape what the reducer holds; every figure is core/figures/run_figures.py's
(``run_figures``, through ``figures`` below); no metric is defined here. Kept in one place
so they can move into RunState if another view needs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.reduce.state import RunState
from neurondesk.reports.fmt import clock

_ONCE: dict[str, tuple[RunState, tuple, object]] = {}


def _once(name: str, state: RunState, now: float, compute):
    """compute(state, now), computed once per refresh: again only for another state, another
    event taken in, or another time (the panels of one frame share one ``now``)."""
    key = (state.event_count, state.finished, now)
    hit = _ONCE.get(name)
    if hit is not None and hit[0] is state and hit[1] == key:
        return hit[2]
    value = compute(state, now)
    _ONCE[name] = (state, key, value)
    return value


def figures(state: RunState, now: float):
    """core's run_figures, once per frame however many panels show them."""
    return _once("figures", state, now, run_figures)


def phase(state: RunState, now: float) -> tuple[str, str]:
    """RunState.phase, once per poll (the app asks it, then the header)."""
    return _once("phase", state, now, RunState.phase)


def phase_text(state: RunState, now: float) -> tuple[str, str]:
    """(phase, words): 'compiling #3 — 0:42 and counting' while a compile is open."""
    name, words = phase(state, now)
    if name == "compiling" and not words.startswith("compiling NEFFs"):  # TorchNeuron's NEFFs say their count
        since = state.open_compile_since()
        return name, f"compiling #{len(state.compiles) + 1} — {clock(now - since)} and counting"
    return name, words


@dataclass(frozen=True)
class Series:
    steps: list[int]
    step_ms: list[float]
    samples_per_s: list[float | None]
    compile_steps: list[int]


def step_series(state: RunState, limit: int = 2000) -> Series:
    """The latest `limit` steps of the history, as plot columns (each step's own rate)."""
    records = list(state.history)[-limit:]
    return Series(
        steps=[r.step for r in records],
        step_ms=[r.duration_s * 1000 for r in records],
        samples_per_s=[(r.samples / r.duration_s) if r.samples and r.duration_s > 0 else None
                       for r in records],
        compile_steps=[r.step for r in records if r.compiled],
    )


def binned(xs: list[int], ys: list[float | None], bins: int) -> tuple[list[int], list[float]]:
    """At most `bins` points for a chart `bins` dots wide: the mean of each run of steps, placed
    at its last step. (A chart cannot show more points than it has dots; the figures in the panels
    come from RunState, not from these.)"""
    size = max(1, -(-len(xs) // max(1, bins)))
    out_x: list[int] = []
    out_y: list[float] = []
    for i in range(0, len(xs), size):
        chunk = [y for y in ys[i:i + size] if y is not None]
        if chunk:
            out_x.append(xs[min(i + size, len(xs)) - 1])
            out_y.append(sum(chunk) / len(chunk))
    return out_x, out_y


@dataclass(frozen=True)
class Unit:
    """One bar in the Devices panel."""

    label: str
    util: float | None  # 0..1
    mem_used: int | None
    mem_total: int | None


def device_units(state: RunState) -> tuple[str, list[Unit], str]:
    """(kind, units, note): per-NeuronCore, per-GPU, or per host CPU when neither is sampled."""
    if state.neuron is not None and state.neuron.cores:
        units = []
        for c in state.neuron.cores:
            used = sum(c.memory.values()) if c.memory else None
            util = c.utilization
            capacity = state.parts.telemetry.core_capacity(c.core)  # not c.memory_total: that is the memory in use
            units.append(Unit(f"nc{c.core}", None if util is None else util / 100, used, capacity))
        return "neuron", units, f"{len(units)} NeuronCores (neuron-monitor)"
    if state.neuron is not None and not (state.gpu is not None and state.gpu.gpus):
        # neuron-monitor is running but this run holds no NeuronCore right now (between runtimes,
        # or after the workload's runtime exited): say so rather than fall back to the host
        return "neuron", [], "neuron-monitor: no NeuronCore in use by this run in the latest sample"
    if state.gpu is not None and state.gpu.gpus:
        units = [Unit(f"gpu{g.index}", None if g.util_gpu is None else g.util_gpu / 100, g.memory_used,
                      g.memory_total) for g in state.gpu.gpus]
        return "gpu", units, f"{len(units)} GPUs (NVML)"
    if state.host is not None:
        units = [Unit(f"cpu{i}", p / 100, None, None) for i, p in enumerate(state.host.per_cpu_percent)]
        return "host", units, "host CPU per core (psutil): no Neuron or GPU telemetry in this run"
    return "none", [], "no device or host samples yet"


def memory_sum(units: list[Unit]) -> tuple[int | None, int | None]:
    """Used and total memory over the units that report them."""
    used = [u.mem_used for u in units if u.mem_used is not None]
    total = [u.mem_total for u in units if u.mem_total is not None]
    return (sum(used) if used else None), (sum(total) if total else None)


def split_text(state: RunState) -> str:
    """Executions per step, and where a step is split when it runs several graphs."""
    per = state.executions_per_step
    if per is None:
        return "graphs per step: —"
    text = f"graphs per step: {per}"
    if state.split_points:
        top = max(state.split_points.values(), key=lambda p: p.count)
        where = top.location.rsplit("/", 1)[-1] if top.location else "?"
        text += f" — split by {top.trigger} at {where} (×{top.count})"
        if len(state.split_points) > 1:
            text += f" +{len(state.split_points) - 1} more"
    return text
