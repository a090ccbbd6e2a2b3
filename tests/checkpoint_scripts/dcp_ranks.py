"""Two gloo ranks under torchrun: DDP steps, torch.distributed.checkpoint's save at step 10 (timed by
the script), async_save at step 15 (waited for), load after the last step. Prints
`dcp-timing:{"rank":..,"save_s":..,"load_s":..}` on each rank. Args: OUT_DIR."""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn

out = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128)))
opt = torch.optim.SGD(model.parameters(), lr=1e-2)
timing = {}
for step in range(1, 21):
    loss = model(torch.randn(8, 128)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 10:
        t0 = time.perf_counter()
        dcp.save({"model": model.state_dict()}, checkpoint_id=os.path.join(out, "sync"))
        timing["save_s"] = time.perf_counter() - t0
    if step == 15:
        dcp.async_save({"model": model.state_dict()}, checkpoint_id=os.path.join(out, "async")).result()
sd = {"model": model.state_dict()}
t0 = time.perf_counter()
dcp.load(sd, checkpoint_id=os.path.join(out, "sync"))
timing["load_s"] = time.perf_counter() - t0
sys.stdout.flush()
os.write(1, ("dcp-timing:" + json.dumps({"rank": rank, **timing}) + "\n").encode())  # one write: ranks' lines never mix
dist.barrier()
dist.destroy_process_group()
