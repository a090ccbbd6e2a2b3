"""A 2-rank DDP job (gloo) that checkpoints every --save-every steps with torch.save, loses rank 1 at
--die-at on the first attempt only (TORCHELASTIC_RESTART_COUNT == 0: os._exit, no handler runs) and,
restarted by torchrun --max-restarts, resumes from its own last checkpoint to finish --steps. With
--always-die rank 1 dies on every attempt (the job dies for good). Prints, on rank 0, one line
`restarts-once: {...}` with what it measured itself (its checkpoint step, seconds in torch.save).

    torchrun --nproc-per-node 2 --max-restarts 1 restarts_once.py --ckpt DIR [--steps 120]

Two nodes (tests/test_goodput_two_nodes.py): --die-where VAR (the rank whose environment says VAR=1 dies)
and --shared-generation (the attempts' file rendezvous numbered by a count in torchrun's store).
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", required=True)
ap.add_argument("--steps", type=int, default=120)
ap.add_argument("--save-every", type=int, default=25)
ap.add_argument("--die-at", type=int, default=60)
ap.add_argument("--always-die", action="store_true")
ap.add_argument("--step-s", type=float, default=0.01)
ap.add_argument("--die-where", metavar="VAR", help="the rank whose environment has VAR=1 dies, not rank 1")
ap.add_argument("--shared-generation", action="store_true",
                help="name each attempt's file rendezvous by a count kept in torchrun's store, not the node's restart count")
ap.add_argument("--ballast-floats", type=int, default=4_000_000)  # 16 MB in each checkpoint: a save worth timing
args = ap.parse_args()

attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
generation = attempt
if args.shared_generation:
    # many nodes: an agent that restarts because another node re-joined the rendezvous does not count it
    # (TORCHELASTIC_RESTART_COUNT stays 0 there), so the attempts are numbered by a count in the rendezvous
    # store every worker of every attempt adds 1 to (attempts follow each other: the workers of the next one
    # start once every node has stopped those of the last)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
    generation = (store.add("restarts-once/workers", 1) - 1) // int(os.environ["WORLD_SIZE"])
# a file rendezvous of its own per attempt: torchrun's store, reused by the restart, can hand a restarted
# gloo mesh the previous attempt's addresses (connectFullMesh refused, seen with torch 2.9 on loopback)
dist.init_process_group("gloo", init_method=f"file://{Path(args.ckpt).resolve()}/rendezvous.{generation}",
                        rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
path = Path(args.ckpt) / "ckpt.pt"
start, save_s = 0, 0.0
if path.exists():
    state = torch.load(path)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]
for step in range(start, args.steps):
    x = torch.randn(8, 16)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(args.step_s)
    done = step + 1
    dies_here = os.environ.get(args.die_where) == "1" if args.die_where else rank == 1
    if dies_here and done == args.die_at and (attempt == 0 or args.always_die):
        os._exit(7)
    if done % args.save_every == 0:
        dist.barrier()
        if rank == 0:
            tmp = path.with_suffix(".tmp")
            payload = {"model": model.module.state_dict(), "opt": opt.state_dict(), "step": done,
                       "ballast": torch.ones(args.ballast_floats)}
            t0 = time.perf_counter()  # the save alone, as neurondesk times it (not the payload's making)
            torch.save(payload, tmp)
            took = time.perf_counter() - t0
            os.replace(tmp, path)
            save_s += took
            print(f"restarts-once-save: {took:.6f}", flush=True)  # each save as it happens: a dead attempt's too
        dist.barrier()
if rank == 0:
    print("restarts-once: " + json.dumps({"attempt": attempt, "start": start, "save_s": save_s}), flush=True)
dist.destroy_process_group()
