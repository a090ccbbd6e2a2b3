"""A node of a job for the job summary tests: a short eager loop with an optimizer (the probe says hello
with the launch variables the test sets); SLEEP paces it, FAIL ends it with an exception."""

import os
import time

import torch

model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for step in range(int(os.environ.get("STEPS", "40"))):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    time.sleep(float(os.environ.get("SLEEP", "0.01")))
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
if os.environ.get("FAIL"):
    raise RuntimeError("boom on this node")
