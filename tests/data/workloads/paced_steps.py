"""Optimizer steps of a tiny model, 20 ms apart (8 samples each), until a file appears; then a
few more, and exit. A live run for the metrics tests that lasts exactly as long as a test needs.

    python paced_steps.py RELEASE_PATH
"""

import os
import sys
import time

import torch

release = sys.argv[1]
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)
step = 0
while not os.path.exists(release) and step < 30000:
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    step += 1
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(0.02)
print(f"paced_steps ran {step} steps", flush=True)
