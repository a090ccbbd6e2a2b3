"""N eager-torch optimizer steps that print nothing until the end, then exit with EXIT_CODE.

    python quiet_steps.py STEPS EXIT_CODE
"""

import sys

import torch

steps, code = int(sys.argv[1]), int(sys.argv[2])
p = torch.nn.Parameter(torch.zeros(4))
opt = torch.optim.SGD([p], lr=0.1)
for _ in range(steps):
    (p - 1).pow(2).sum().backward()
    opt.step()
    opt.zero_grad()
print(f"quiet_steps ran {steps} steps", flush=True)
sys.exit(code)
