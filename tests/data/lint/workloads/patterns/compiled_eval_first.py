"""torch.compile(module) whose first call is an evaluation under no_grad, then training (eager CPU).

    python compiled_eval_first.py [STEPS]
"""

import sys

import torch
from _common import Tiny, batch, truth

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
model = Tiny()
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
model.eval()
with torch.no_grad():
    compiled(batch(0, 8, "cpu")[0])
model.train()
for i in range(steps):
    ids, labels = batch(i, 8, "cpu")
    torch.nn.functional.cross_entropy(compiled(ids), labels).backward()
    opt.step()
    opt.zero_grad()
truth(steps=steps)
