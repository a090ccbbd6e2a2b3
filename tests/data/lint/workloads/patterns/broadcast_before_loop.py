"""A setup sync before the loop (parameters made on the device and cut, as a broadcast does), then STEPS steps.

    PJRT_DEVICE=CPU python broadcast_before_loop.py [STEPS]
"""

import sys

import torch
import torch_xla
from _common import Tiny, batch, truth

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
dev = torch_xla.device()
model = Tiny().to(dev)
with torch.no_grad():
    for p in model.parameters():  # what a rank-0 broadcast leaves: new values, one graph to run
        p.mul_(1.0)
torch_xla.sync()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(steps):
    ids, labels = batch(i, 8, dev)
    torch.nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
truth(steps=steps)
