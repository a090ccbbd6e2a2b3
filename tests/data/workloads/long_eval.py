"""A few optimizer steps, then an evaluation of EVAL_S seconds (forwards under no_grad, 50 ms
apart, with the script's own progress line every 2 s: its bar), then a few more steps.

    python long_eval.py EVAL_S
"""

import sys
import time

import torch

eval_s = float(sys.argv[1])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4)


def train(steps: int) -> None:
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        time.sleep(0.02)


train(5)
model.eval()
start = time.monotonic()
batches = 0
with torch.no_grad():
    while time.monotonic() - start < eval_s:
        model(x)
        batches += 1
        time.sleep(0.05)
print(f"evaluated {batches} batches in {time.monotonic() - start:.1f} s", flush=True)
model.train()
train(3)
