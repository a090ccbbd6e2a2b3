"""Two optimizer steps, then a death that runs no exit handler: the probe's last batch is still in
its buffer (issue 24 item 12). Prints its own step count first.

    python dies_abruptly.py os-exit|sigkill|segfault
"""

import os
import signal
import sys

import torch

p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.0)
p.grad = torch.zeros(1)
for _ in range(2):
    opt.step()
print("dies_abruptly steps: 2", flush=True)
how = sys.argv[1]
if how == "os-exit":
    os._exit(3)
elif how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif how == "segfault":
    import ctypes

    ctypes.string_at(0)  # a real segmentation fault: SIGSEGV, no Python handler runs
