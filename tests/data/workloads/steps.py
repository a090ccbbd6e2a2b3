"""A small eager-torch training loop for the recorder tests: N optimizer steps, one printed line
per step (a pipe into a dead reader would kill it at its next print), then a marker file, so a
test can tell the training ran to its end even when nothing recorded it.

    python steps.py STEPS SLEEP_S MARKER_PATH
"""

import sys
import time

import torch

steps, sleep_s, marker = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
p = torch.nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([p], lr=0.1)
for i in range(steps):
    loss = (p - 1).pow(2).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {i} loss {loss.item():.4f}", flush=True)
    time.sleep(sleep_s)
with open(marker, "w") as f:
    f.write(f"{steps} steps done\n")
print("training done", flush=True)
