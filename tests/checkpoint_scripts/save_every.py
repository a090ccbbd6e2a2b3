"""A training loop that checkpoints as scripts do: torch.save of the model and optimizer to a file every
EVERY steps, timed by the script itself; a load of the last one; a save into a missing folder (the
error printed, as the user sees it). Prints `ckpt-timing:{...}`. Args: OUT_DIR STEPS EVERY."""

import json
import os
import sys
import time

import torch
from torch import nn

out, steps, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
save_s, saves, sizes = 0.0, 0, 0
for step in range(1, steps + 1):
    loss = model(torch.randn(8, 2048)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % every == 0:
        path = os.path.join(out, f"ckpt-{step}.pt")
        t0 = time.perf_counter()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, path)
        save_s += time.perf_counter() - t0
        saves += 1
        sizes += os.path.getsize(path)
t0 = time.perf_counter()
back = torch.load(os.path.join(out, f"ckpt-{steps - steps % every}.pt"), weights_only=True)
load_s = time.perf_counter() - t0
try:
    torch.save(model.state_dict(), os.path.join(out, "missing", "x.pt"))
except Exception as exc:  # noqa: BLE001 - printed as the user sees it
    print("save failed:", type(exc).__name__, exc, flush=True)
print("ckpt-timing:" + json.dumps({"save_s": save_s, "saves": saves, "bytes": sizes, "load_s": load_s,
                                   "step": back["step"]}), flush=True)
