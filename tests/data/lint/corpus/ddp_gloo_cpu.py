"""torchrun with DDP over gloo: rank 0 logs every 10 steps."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = int(os.environ["RANK"])
model = DDP(Model())
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(200):
    x, y = batch_for(rank, step)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == 0 and step % 10 == 0:
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        print(f"step {step} loss {reduced.item() / dist.get_world_size():.4f}")  # expect: item
        print(step, float(args.lr))
dist.destroy_process_group()
