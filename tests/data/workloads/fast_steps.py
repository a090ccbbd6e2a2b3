"""As many optimizer steps as the CPU gives (a one-element parameter) until a file appears, then
a few thousand more; prints how many it ran. For the recorder's back-pressure test.

    python fast_steps.py RELEASE_PATH
"""

import os
import sys

import torch

release = sys.argv[1]
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.0)
p.grad = torch.zeros(1)
steps = 0
while not os.path.exists(release):
    for _ in range(500):
        opt.step()
    steps += 500
    if steps % 10000 == 0:
        print(f"fast_steps at {steps}", flush=True)  # to its own stdout file: readable with no recorder
for _ in range(3000):
    opt.step()
steps += 3000
print(f"fast_steps ran {steps} steps", flush=True)
