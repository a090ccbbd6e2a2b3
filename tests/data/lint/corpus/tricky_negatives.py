"""Code inside a training step that reads no tensor: host counters, numpy, strings, shapes, configs."""
import json
import subprocess
import time

import numpy as np
import torch
import torch_xla

device = torch_xla.device()
model = Model().to(device)
opt = torch.optim.AdamW(model.parameters())
meter = {"n": 0}
for step, batch in enumerate(train_loader):
    t0 = time.perf_counter()
    ids = batch["input_ids"].to(device)
    loss = model(ids).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    meter["n"] += ids.shape[0]
    weights = np.ones(4)
    if weights.sum() > 3:
        weights = weights / weights.sum()
    listed = weights.tolist()
    output = subprocess.run(["true"], capture_output=True).stdout.decode()
    if output:
        print(output)
    config = json.loads("{}")
    if config.get("stop"):
        break
    seq = ids.shape[1]
    half = ids[:, : seq // 2]
    elapsed = time.perf_counter() - t0
    print(f"step {step} took {elapsed:.3f}s, {meter['n']} samples")
    if step and step % 100 == 0:
        torch.save(model.state_dict(), f"ckpt-{step}.pt")
