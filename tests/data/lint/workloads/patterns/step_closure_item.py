"""MpDeviceLoader, and a step closure that reads the loss with .item() (run inside the loader's sync).

    PJRT_DEVICE=CPU python step_closure_item.py [STEPS]
"""

import sys

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from _common import Tiny, batch, truth, xla_compiles

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
dev = torch_xla.device()
model = Tiny().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [batch(i, 8, "cpu") for i in range(steps)]
losses = []
for ids, labels in pl.MpDeviceLoader(data, dev):
    loss = torch.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    opt.step()
    opt.zero_grad()
    xm.add_step_closure(lambda t: losses.append(t.item()), args=(loss,))
torch_xla.sync()
truth(steps=steps, compiles=xla_compiles())
