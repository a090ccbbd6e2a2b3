"""Two gloo ranks under torchrun: rank 0 alone torch.saves a 64 MB payload every 5 steps (made before
its clock) between two dist.barrier() calls; rank 1 waits for it in the second barrier and times that
barrier itself. Prints `wait-timing:{"rank":1,"barrier_s":[..]}` on rank 1. Args: OUT_DIR."""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

out = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
waits = []
for step in range(1, 16):
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.01)
    if step % 5 == 0:
        payload = {"model": model.state_dict(), "step": step, "ballast": torch.ones(16_000_000)} if rank == 0 else None
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            torch.save(payload, os.path.join(out, "ckpt.pt"))
        dist.barrier()
        waits.append(time.perf_counter() - t0)
if rank == 1:
    os.write(1, ("wait-timing:" + json.dumps({"rank": rank, "barrier_s": waits}) + "\n").encode())
dist.barrier()
dist.destroy_process_group()
