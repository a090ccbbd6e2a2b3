"""The lazy graph is never cut: no torch_xla.sync() / mark_step, only a .item() read of the loss,
so every step's graph holds all the steps before it and compiles anew (the recompile storm).

    PJRT_DEVICE=CPU python lazy_never_cut.py [STEPS]
"""

import sys

import torch
import torch_xla
from _common import Tiny, batch, truth, xla_compiles

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
dev = torch_xla.device()
model = Tiny().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(steps):
    ids, labels = batch(i, 8, dev)
    loss = torch.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {i} loss {loss.item():.4f}", flush=True)
truth(steps=steps, compiles=xla_compiles())
