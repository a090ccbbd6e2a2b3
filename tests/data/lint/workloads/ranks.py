"""Many ranks for train.py: who this process is under torchrun (or torch_xla.launch), DDP over gloo
for the eager backends, and the per-rank troubles real jobs suffer (a straggler, a recompile on
one rank only, a crash on one rank), each switched on for a single rank."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    local_rank: int = 0
    world: int = 1

    @property
    def distributed(self) -> bool:
        return self.world > 1


def discover() -> Ranks:
    """From torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE); one process otherwise."""
    env = os.environ
    world = int(env.get("WORLD_SIZE", "1") or 1)
    return Ranks(rank=int(env.get("RANK", "0") or 0), local_rank=int(env.get("LOCAL_RANK", "0") or 0), world=world)


def wrap(model, ranks: Ranks, backend_kind: str):
    """DDP over gloo for cpu (real collectives on this machine); an XLA rank on the CPU trains alone
    (no collective between XLA:CPU processes here), so it is returned as it is."""
    if not ranks.distributed or backend_kind not in ("cpu", "cuda"):
        return model, "none" if not ranks.distributed else f"none: each {backend_kind} rank trains alone"
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    backend = "nccl" if backend_kind == "cuda" else "gloo"
    dist.init_process_group(backend)
    return DistributedDataParallel(model), f"DDP over {backend}, world {ranks.world}"


def finish(ranks: Ranks) -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def straggle(args, ranks: Ranks, kind: str) -> None:
    """The chosen rank spends --straggler-ms more in its forward (compute) or waiting for its
    batch (data); every other rank, and every other kind, returns at once."""
    if args.straggler_rank == ranks.rank and args.straggler_kind == kind and args.straggler_ms > 0:
        if kind == "compute":  # busy, as a slow forward is: not a sleep the OS could hide
            end = time.perf_counter() + args.straggler_ms / 1000
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(args.straggler_ms / 1000)
