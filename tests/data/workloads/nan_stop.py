"""A script that stops itself on a NaN loss, as training scripts do (timm, detectron2 and others
raise or exit when the loss is not finite): three good steps, then the loss is NaN at step 3.

    python nan_stop.py
"""

import math

import torch

p = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([p], lr=0.01)
for step in range(100):
    scale = float("nan") if step == 3 else 1.0
    loss = (p * scale).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    if not math.isfinite(loss.item()):
        raise FloatingPointError(f"loss is {loss.item()} at step {step}, stopping training")
