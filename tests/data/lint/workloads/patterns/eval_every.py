"""Train STEPS steps of batch 8; every EVERY steps evaluate K batches of 32 under no_grad (model.eval()).

    PJRT_DEVICE=CPU python eval_every.py [STEPS] [EVERY] [K]
"""

import sys

import torch
import torch_xla
from _common import Tiny, batch, truth, xla_compiles

steps, every, k = (int(a) for a in (sys.argv[1:] + ["30", "10", "4"][len(sys.argv) - 1:])[:3])
dev = torch_xla.device()
model = Tiny().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
evals = 0
for i in range(steps):
    ids, labels = batch(i, 8, dev)
    loss = torch.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    if (i + 1) % every == 0:
        model.eval()
        total = torch.zeros((), device=dev)
        with torch.no_grad():
            for j in range(k):
                ids, labels = batch(10_000 + j, 32, dev)
                total += torch.nn.functional.cross_entropy(model(ids), labels)
                torch_xla.sync()
        print(f"step {i + 1}: eval loss {total.item() / k:.4f}", flush=True)
        model.train()
        evals += 1
truth(steps=steps, train_samples=steps * 8, eval_phases=evals, eval_batches=evals * k, compiles=xla_compiles())
