"""Why a step takes what it takes: the steady step split into its phases, and a verdict with the
next step to try. Pure; read by RunFigures (core/figures/run_figures.py), which every output reads.

What the probe times, on the training thread's clock, with no device sync of its own
(docs/phases.md): the wait for the next batch (input_wait), from that batch to the forward that
takes it (h2d: the copy to the device and whatever the script does to the batch), the training
forwards, the backwards, the optimizer steps, torch.distributed calls (collective; DDP's gradient
all-reduce runs inside the backward and shows there), XLA syncs. ``other`` is what none of them
took (the loss outside the model, zero_grad, logging, a checkpoint). The phases are a partition of
the steady step every output shows (the rank's median, figures.step_time_s): each phase's share of the
steady steps' time (from their means, ``mean_step_s``; ``other`` never below 0, the timed phases scaled
down where they overlap past the step), in seconds of that step. The median and the mean part where
steps differ (an input-bound loop whose workers keep most batches ready: a few long waits, many short
steps); the phases never add up to more than the step.

By backend:
- eager / torch.compile on a CPU: forward, backward and optimizer are the work itself; there is
  no copy to a device (h2d null; the batch's preparation is in other).
- eager on CUDA / Neuron's native backend: the host times of asynchronous kernels (their launch);
  the device's wait shows where the host waits for it (the optimizer, a ``.item()``).
- XLA (lazy tensors): forward, backward and optimizer only trace the graph on the host: they are
  one phase, host_tracing, and forward / backward / optimizer are null (the device has no separate
  forward time); device_wait is the time in the step's syncs (the graph's execution, and a compile
  in a step that compiled, which is never steady).
"""

from __future__ import annotations

import msgspec

from neurondesk.core.figures.phase_verdict import LoaderFacts, verdict
from neurondesk.core.reduce.phases import PhaseStep, PhaseSums
from neurondesk.core.reduce.state import RunState

NAMES = ("input_wait", "h2d", "forward", "backward", "optimizer", "collective", "host_tracing", "device_wait",
         "other")
IN_STEP_ORDER = ("input_wait", "h2d", "forward", "backward", "host_tracing", "optimizer", "collective", "device_wait",
                 "other")  # where each usually falls in a step (the Perfetto export lays them out so)
LABELS = {"input_wait": "input wait", "h2d": "h2d", "forward": "forward", "backward": "backward",
          "optimizer": "optimizer", "collective": "collective", "host_tracing": "host tracing",
          "device_wait": "device wait", "other": "other"}


class PhaseShare(msgspec.Struct, frozen=True):
    name: str  # one of NAMES
    seconds: float  # per steady step
    share: float  # of the mean steady step


class StepPhases(msgspec.Struct, frozen=True, kw_only=True):
    """Seconds per steady step by phase (null where the backend cannot tell), of one rank."""

    rank: int | None = None
    pid: int | None = None
    backend: str  # "eager-cpu" | "eager-device" | "xla"
    steps: int  # steady steps the means are over
    step_s: float  # the steady step time (the one basis: the mean steady step): the phases add up to it
    mean_step_s: float | None = None  # the mean of the steady steps the shares are of
    input_wait: float | None = None
    h2d: float | None = None
    forward: float | None = None
    backward: float | None = None
    optimizer: float | None = None
    collective: float | None = None
    host_tracing: float | None = None  # XLA: forward + backward + optimizer, tracing on the host
    device_wait: float | None = None  # XLA: the step's syncs
    other: float | None = None
    split: list[PhaseShare] = []  # the known phases, largest first
    verdict: str | None = None  # "input-bound" | "collective-bound" | "host-bound" | "device-bound" |
    # "optimizer-bound" | "other-bound" | "compute-bound"
    words: str | None = None  # the verdict in words, with the next step to try
    num_workers: int | None = None  # DataLoader workers per rank seen in steady state (None: not sampled)
    try_num_workers: int | None = None  # input-bound: the workers the words say to try


class StepBar(msgspec.Struct, frozen=True):
    """One recent step of the lead, split as the steady means are (the console's stacked bars)."""

    step: int
    duration_s: float
    steady: bool  # past the warm-up, nothing compiled in it
    parts: list[PhaseShare]  # the known phases in step order (IN_STEP_ORDER); none: the step was not timed


def _backend(xla: bool, device_kind: str | None) -> str:
    if xla or (device_kind or "").startswith("xla"):
        return "xla"
    return "eager-cpu" if device_kind in (None, "cpu") else "eager-device"


def _values(backend: str, step: float, wait: float, raw: list[float] | tuple[float, ...]) -> dict[str, float | None]:
    """The phases of one step (or of the mean step) by name: what the backend can tell, ``other``
    the rest (never below 0)."""
    h2d, fwd, bwd, opt, sync, coll = raw
    values: dict[str, float | None] = dict.fromkeys(NAMES)
    values.update(input_wait=wait, collective=coll)
    if backend == "xla":
        values.update(h2d=h2d, host_tracing=fwd + bwd + opt, device_wait=sync)
    else:
        values.update(h2d=None if backend == "eager-cpu" else h2d, forward=fwd, backward=bwd, optimizer=opt)
    known = sum(v for v in values.values() if v is not None)
    if known > step > 0:  # timed spans that overlap (or reach past the step): scaled to fit in it
        values = {k: None if v is None else v * step / known for k, v in values.items()}
    values["other"] = max(0.0, step - known)
    return values


def phases_of(sums: PhaseSums, device_kind: str | None, rank: int | None = None,
              loader: LoaderFacts | None = None, step_s: float | None = None) -> StepPhases | None:
    """``step_s``: the steady step the phases partition (the rank's median); None: the mean of its steps."""
    if not sums.steps or sums.step_s <= 0:
        return None
    n, backend = sums.steps, _backend(sums.xla, device_kind)
    mean = sums.step_s / n
    step = step_s if step_s is not None and step_s > 0 else mean
    values = {k: None if x is None else x * step / mean
              for k, x in _values(backend, mean, sums.wait_s / n, [x / n for x in sums.phases]).items()}
    split = sorted((PhaseShare(k, round(v, 9), round(v / step, 4)) for k, v in values.items() if v is not None),
                   key=lambda p: -p.seconds)
    v = verdict(backend, {p.name: p.share for p in split}, step, loader)
    return StepPhases(rank=rank, pid=sums.pid, backend=backend, steps=n, step_s=round(step, 9),
                      mean_step_s=round(mean, 9),
                      **{k: None if x is None else round(x, 9) for k, x in values.items()},
                      split=split, verdict=v.name, words=v.words,
                      num_workers=loader.workers if loader is not None else None, try_num_workers=v.try_num_workers)


def short_verdict(p: StepPhases) -> str | None:
    """The verdict and the largest phase, for a status line: 'input-bound (input wait 93%)'."""
    if p.verdict is None or not p.split:
        return None
    top = p.split[0]
    return f"{p.verdict} ({LABELS[top.name]} {top.share:.0%})"


def step_parts(duration_s: float, data_wait_s: float, phases: list[float] | tuple[float, ...] | None, xla: bool,
               device_kind: str | None) -> list[PhaseShare]:
    """One step's phases (StepEnded.phases_s) by name, in step order (IN_STEP_ORDER), with their
    share of the step; none when the step was not split."""
    if not phases or duration_s <= 0:
        return []
    values = _values(_backend(xla, device_kind), duration_s, data_wait_s, phases)
    return [PhaseShare(k, values[k], values[k] / duration_s) for k in IN_STEP_ORDER if values[k] is not None]


def step_bar(s: PhaseStep, device_kind: str | None) -> StepBar:
    return StepBar(s.step, s.duration_s, s.steady, step_parts(s.duration_s, s.data_wait_s, s.phases, s.xla, device_kind))


def recent_step_bars(state: RunState, n: int = 60) -> list[StepBar]:
    """The lead's latest ``n`` steps (at most core/reduce/phases.RECENT), each split into its phases."""
    recent = list(state.parts.phases.recent)[-n:] if n > 0 else []
    return [step_bar(s, state.device_kind) for s in recent]


def loader_facts(state: RunState) -> LoaderFacts:
    """The DataLoader and the host as the steady samples saw them (core/figures/phase_verdict.py's input)."""
    tele = state.parts.telemetry
    steady = tele.steady_processes
    here = max(1, len(state.parts.ranks.ranks))
    cpus = tele.inventory.cpu.logical_cores if tele.inventory is not None else None
    workers = steady.dataloader_workers // here if steady.samples else None
    return LoaderFacts(workers=workers, host_cpu_percent=steady.host_cpu_percent, cpus=cpus, ranks_here=here)


def step_phases_by_rank(state: RunState) -> list[StepPhases]:
    """Every process that reported phased steady steps, by rank; each split of its steady step as the
    figures give it (one process: the run's mean step, the one steady basis, core/figures/run_figures.job_step_time_s;
    many: each rank's own mean step)."""
    ranks = state.parts.ranks.ranks
    loader = loader_facts(state)
    one = state.steady_step_time_s if state.world <= 1 else None
    out = []
    for pid, sums in state.parts.phases.by_pid.items():
        r = ranks.get(pid)
        step = one if one is not None else (r.mean_step_s if r is not None else None)
        p = phases_of(sums, state.device_kind, r.rank if r is not None else None, loader, step)
        if p is not None:
            out.append(p)
    return sorted(out, key=lambda p: (p.rank if p.rank is not None else -1, p.pid or 0))

