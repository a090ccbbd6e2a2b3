"""Why a step takes what it takes: the steady step split into its phases, and a verdict with the
next step to try. Pure; read by RunFigures (core/figures.py), which every output reads.

What the probe times, on the training thread's clock, with no device sync of its own
(docs/phases.md): the wait for the next batch (input_wait), from that batch to the forward that
takes it (h2d: the copy to the device and whatever the script does to the batch), the training
forwards, the backwards, the optimizer steps, torch.distributed calls (collective; DDP's gradient
all-reduce runs inside the backward and shows there), XLA syncs. ``other`` is what none of them
took (the loss outside the model, zero_grad, logging, a checkpoint). Means over the steady steps:
the phases add up to the mean steady step time, ``other`` never below 0.

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

from neurondesk.core.reduce.phases import PhaseSums
from neurondesk.core.state import RunState

NAMES = ("input_wait", "h2d", "forward", "backward", "optimizer", "collective", "host_tracing", "device_wait",
         "other")
LABELS = {"input_wait": "input wait", "h2d": "h2d", "forward": "forward", "backward": "backward",
          "optimizer": "optimizer", "collective": "collective", "host_tracing": "host tracing",
          "device_wait": "device wait", "other": "other"}
INPUT_BOUND, COLLECTIVE_BOUND, OPTIMIZER_BOUND, HOST_BOUND, OTHER_BOUND = 0.20, 0.25, 0.35, 0.50, 0.35


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
    step_s: float  # the mean steady step time (the phases add up to it)
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


def _backend(sums: PhaseSums, device_kind: str | None) -> str:
    if sums.xla or (device_kind or "").startswith("xla"):
        return "xla"
    return "eager-cpu" if device_kind in (None, "cpu") else "eager-device"


def phases_of(sums: PhaseSums, device_kind: str | None, rank: int | None = None) -> StepPhases | None:
    if not sums.steps or sums.step_s <= 0:
        return None
    n, backend = sums.steps, _backend(sums, device_kind)
    h2d, fwd, bwd, opt, sync, coll = (x / n for x in sums.phases)
    step, wait = sums.step_s / n, sums.wait_s / n
    values: dict[str, float | None] = dict.fromkeys(NAMES)
    values.update(input_wait=wait, collective=coll)
    if backend == "xla":
        values.update(h2d=h2d, host_tracing=fwd + bwd + opt, device_wait=sync)
    else:
        values.update(h2d=None if backend == "eager-cpu" else h2d, forward=fwd, backward=bwd, optimizer=opt)
    known = sum(v for v in values.values() if v is not None)
    values["other"] = max(0.0, step - known)
    split = sorted((PhaseShare(k, round(v, 9), round(v / step, 4)) for k, v in values.items() if v is not None),
                   key=lambda p: -p.seconds)
    shares = {p.name: p.share for p in split}
    verdict, words = _verdict(backend, shares)
    return StepPhases(rank=rank, pid=sums.pid, backend=backend, steps=n, step_s=round(step, 9),
                      **{k: None if v is None else round(v, 9) for k, v in values.items()},
                      split=split, verdict=verdict, words=words)


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _verdict(backend: str, s: dict[str, float]) -> tuple[str, str]:
    """The phase that bounds the step, in words a user acts on (input advice with its worker
    counts is core/diagnostics.py's input_advice)."""
    if s.get("input_wait", 0) >= INPUT_BOUND:
        return "input-bound", (f"input-bound: {_pct(s['input_wait'])} of each step waits for the DataLoader; "
                               "try more DataLoader workers (num_workers), pin_memory and prefetch_factor, or a "
                               "cheaper __getitem__ (decode and augment offline)")
    if s.get("collective", 0) >= COLLECTIVE_BOUND:
        return "collective-bound", (f"collective-bound: {_pct(s['collective'])} of each step is in "
                                    "torch.distributed calls; fewer or larger ones (one all_reduce of a flat "
                                    "buffer), gradient accumulation with no_sync, a larger batch per rank")
    if backend == "xla":
        if s.get("host_tracing", 0) >= HOST_BOUND:
            return "host-bound", (f"host-bound: tracing takes {_pct(s['host_tracing'])} of the step on XLA: fewer "
                                  "Python ops per step, or torch_xla.compile (the traced graph is cached)")
        if s.get("device_wait", 0) >= HOST_BOUND:
            return "device-bound", (f"device-bound: {_pct(s['device_wait'])} of the step waits for the device at "
                                    "the sync: the graph's compute itself; bf16, a larger batch, or a model "
                                    "change move it (see MFU)")
    if s.get("optimizer", 0) >= OPTIMIZER_BOUND:
        return "optimizer-bound", (f"optimizer-bound: the optimizer takes {_pct(s['optimizer'])} of each step; "
                                   "try foreach=True or fused=True, or fewer, larger parameter tensors")
    if s.get("other", 0) >= OTHER_BOUND:
        return "other-bound", (f"{_pct(s['other'])} of each step is outside the data, forward, backward and "
                               "optimizer: logging, .item() reads, checkpoints, the loss outside the model; "
                               "do them every N steps")
    compute = s.get("forward", 0) + s.get("backward", 0) + s.get("device_wait", 0) + s.get("host_tracing", 0)
    return "compute-bound", (f"compute-bound: forward and backward take {_pct(compute)} of each step: the "
                             "model's own work; mixed precision, torch.compile or a larger batch move it")


def step_phases_by_rank(state: RunState) -> list[StepPhases]:
    """Every process that reported phased steady steps, by rank."""
    ranks = state.parts.ranks.ranks
    out = []
    for pid, sums in state.parts.phases.by_pid.items():
        r = ranks.get(pid)
        p = phases_of(sums, state.device_kind, r.rank if r is not None else None)
        if p is not None:
            out.append(p)
    return sorted(out, key=lambda p: (p.rank if p.rank is not None else -1, p.pid or 0))

