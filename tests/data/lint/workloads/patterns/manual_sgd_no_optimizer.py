"""Training with no optimizer (pytorch/examples' word_language_model default loop): loss.backward(),
then `p.data.add_(p.grad, alpha=-lr)` by hand, and an evaluation under eval() + no_grad at the end.

    python manual_sgd_no_optimizer.py [STEPS]
"""

import sys

import torch
from _common import Tiny, batch, truth

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
model = Tiny()
lr = 0.05
for i in range(steps):
    ids, labels = batch(i, 8, "cpu")
    model.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
model.eval()
with torch.no_grad():
    for j in range(2):
        model(batch(500 + j, 4, "cpu")[0])
truth(steps=steps, train_samples=8 * steps, eval_batches=2)
