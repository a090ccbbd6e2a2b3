"""The verdict of a steady step split (core/figures/phases.py): the phase that bounds the step, and what to
try, in words a user acts on. Pure.

Input-bound advice names a number of DataLoader workers when the run says how many there are now
(the process tree's steady samples: DataLoader worker processes per rank on this node): the loader
keeps up when ``workers / (1 - input share)`` workers produce a batch while the step computes,
with 10% to spare (4 workers and 41% of the step waiting: 8), at most the host's logical cores per
rank less one (the training process's own). Where no more cores are left, or the host's CPU is
already nearly all busy while workers load, more workers cannot help and the words say what can
(with no worker at all, one still overlaps the loading with the step, however busy the host).
"""

from __future__ import annotations

import math

import msgspec

INPUT_BOUND, COLLECTIVE_BOUND, OPTIMIZER_BOUND, HOST_BOUND, OTHER_BOUND = 0.20, 0.25, 0.35, 0.50, 0.35
HOST_BUSY = 90.0  # % of the whole machine: more workers would only compete for the same cores
SPARE = 1.10  # workers to spare over the ones the loader needs to keep up
FIRST_WORKERS = 4  # what to try first when the batches are loaded in the training process


class LoaderFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the run knows of the DataLoader and the host, in steady state (None: not sampled)."""

    workers: int | None = None  # DataLoader worker processes per rank now
    host_cpu_percent: float | None = None  # the whole machine's CPU, mean over steady samples
    cpus: int | None = None  # the host's logical cores
    ranks_here: int = 1  # training processes on this host


class Verdict(msgspec.Struct, frozen=True):
    name: str
    words: str
    try_num_workers: int | None = None  # input-bound with the worker count known: what to try


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def workers_to_try(share: float, loader: LoaderFacts) -> int | None:
    """The DataLoader workers to try for an input wait of ``share`` of the step; None when the
    count now is not known, or when more workers cannot help (no core left for them)."""
    now = loader.workers
    if now is None:
        return None
    cap = None if not loader.cpus else max(1, loader.cpus // max(1, loader.ranks_here) - 1)
    want = FIRST_WORKERS if now == 0 else math.ceil(now / max(0.1, 1.0 - share) * SPARE)
    if cap is not None:
        want = min(want, cap)
    return want if want > now else None


def _input_words(share: float, loader: LoaderFacts) -> tuple[str, int | None]:
    head = f"input-bound: {_pct(share)} of each step waits for the DataLoader; "
    host = loader.host_cpu_percent
    host_words = "" if host is None else f", host CPU {host:.0f}%"
    want = workers_to_try(share, loader)
    if loader.workers is None:
        return head + ("try more DataLoader workers (num_workers), pin_memory and prefetch_factor, or a cheaper "
                       "__getitem__ (decode and augment offline)"), None
    busy = host is not None and host >= HOST_BUSY and loader.workers > 0  # with none, a worker still overlaps
    if want is None or busy:
        cores = f", {loader.cpus} cores" if loader.cpus else ""
        return head + (f"more workers will not help ({loader.workers} now{host_words}{cores}): a cheaper "
                       "__getitem__ (decode and augment offline, smaller samples), or more vCPUs"), None
    if loader.workers == 0:
        return head + (f"try num_workers={want} (0 now: batches are loaded in the training process"
                       f"{host_words})"), want
    return head + f"try num_workers={want} ({loader.workers} now{host_words})", want


def verdict(backend: str, s: dict[str, float], step_s: float, loader: LoaderFacts | None = None) -> Verdict:
    """``s``: each known phase's share of the step; ``step_s``: the mean steady step."""
    if s.get("input_wait", 0) >= INPUT_BOUND:
        words, want = _input_words(s["input_wait"], loader or LoaderFacts())
        return Verdict("input-bound", words, want)
    if s.get("collective", 0) >= COLLECTIVE_BOUND:
        return Verdict("collective-bound", f"collective-bound: {_pct(s['collective'])} of each step is in "
                       "torch.distributed calls or waits for DDP's all-reduce; with many ranks, first see whether a "
                       "slower rank or node holds the others back (the ranks table, fleet); else fewer or larger "
                       "ones (one all_reduce of a flat buffer), gradient accumulation with no_sync, a larger batch "
                       "per rank")
    if backend == "xla":
        if s.get("host_tracing", 0) >= HOST_BOUND:
            return Verdict("host-bound", f"host-bound: tracing takes {_pct(s['host_tracing'])} of the step on XLA: "
                           "fewer Python ops per step, or torch_xla.compile (the traced graph is cached)")
        if s.get("device_wait", 0) >= HOST_BOUND:
            return Verdict("device-bound", f"device-bound: {_pct(s['device_wait'])} of the step waits for the "
                           "device at the sync: the graph's compute itself; bf16, a larger batch, or a model change "
                           "move it (see MFU)")
    if s.get("optimizer", 0) >= OPTIMIZER_BOUND:
        ms = s["optimizer"] * step_s * 1e3
        return Verdict("optimizer-bound", f"optimizer-bound: the optimizer takes {_pct(s['optimizer'])} of each "
                       f"step ({ms:,.1f} ms); try foreach=True or fused=True, or fewer, larger parameter tensors")
    if s.get("other", 0) >= OTHER_BOUND:
        return Verdict("other-bound", f"other-bound: {_pct(s['other'])} of each step is outside the data, forward, "
                       "backward and optimizer: logging, .item() reads, checkpoints, the loss outside the model; "
                       "do them every N steps")
    compute = s.get("forward", 0) + s.get("backward", 0) + s.get("device_wait", 0) + s.get("host_tracing", 0)
    return Verdict("compute-bound", f"compute-bound: forward and backward take {_pct(compute)} of each step: the "
                   "model's own work; mixed precision, torch.compile or a larger batch move it")
