"""Optimizer steps of a tiny model that keep a tensor each from step 2 on (a leak: LEAK_MIB MiB a step,
every page written) until something ends the process: run in a cgroup with a memory limit, the
kernel's OOM killer does (tests/test_crash_runs.py).

    python eats_memory.py [LEAK_MIB]
"""

import sys
import time

import torch

leak_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for step in range(100_000):
    loss = model(torch.ones(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    if step >= 2:
        kept.append(torch.ones(leak_mib << 18))  # float32: leak_mib MiB
    time.sleep(0.05)
