"""Trainer / accelerate with torch_compile: training goes through the compiled wrapper
(torch.compile's OptimizedModule), evaluation calls the module inside it, under no_grad and
eval() (eager CPU, Inductor's sibling backend "eager" to keep it quick).

    python compiled_train_plain_eval.py [STEPS] [EVAL_EVERY] [EVAL_BATCHES]
"""

import sys

import torch
from _common import Tiny, batch, truth

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
every = int(sys.argv[2]) if len(sys.argv) > 2 else 4
eval_batches = int(sys.argv[3]) if len(sys.argv) > 3 else 3
model = Tiny()
compiled = torch.compile(model, backend="eager")  # what training calls
opt = torch.optim.SGD(model.parameters(), lr=0.01)
phases = 0
for i in range(1, steps + 1):
    ids, labels = batch(i, 8, "cpu")
    torch.nn.functional.cross_entropy(compiled(ids), labels).backward()
    opt.step()
    opt.zero_grad()
    if i % every == 0:
        model.eval()  # evaluation calls the plain module, as Trainer's evaluation_loop does
        with torch.no_grad():
            for j in range(eval_batches):
                model(batch(1000 + j, 4, "cpu")[0])
        model.train()
        phases += 1
truth(steps=steps, train_samples=8 * steps, eval_phases=phases, eval_batches=phases * eval_batches)
