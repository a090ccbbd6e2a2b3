"""Trainer's logging step on XLA: the loss is averaged across processes with xm.mesh_reduce inside
the training step, every few steps, after a collective-style sync of the loss through
torch_xla's _xla_sync_multi directly (as torch_xla's own helpers do, not torch_xla.sync): its
graph compiles outside any sync the probe wraps.

    python mesh_reduce_logging.py [STEPS] [LOG_EVERY]
"""

import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm
from _common import Tiny, batch, truth, xla_compiles

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
every = int(sys.argv[2]) if len(sys.argv) > 2 else 3
device = torch_xla.device()
model = Tiny().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(1, steps + 1):
    ids, labels = batch(i, 8, device)
    loss = torch.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    if i % every == 0:
        scaled = loss.detach() * 2.0
        torch_xla._XLAC._xla_sync_multi([scaled], devices=[], wait=True)
        mean = xm.mesh_reduce("loss", scaled, lambda xs: sum(xs) / len(xs))
        print(f"step {i} loss {float(mean) / 2.0:.4f}", flush=True)
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
truth(steps=steps, compiles=xla_compiles())
