"""Back-to-back evaluations (Trainer's last in-training evaluation then its final evaluate();
Lightning's validation, test and predict): each a new pass over a DataLoader, no training step
between them (eager CPU).

    python back_to_back_eval.py [STEPS]
"""

import sys

import torch
from _common import SEQ, VOCAB, Tiny, batch, truth
from torch.utils.data import DataLoader, TensorDataset

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
model = Tiny()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
val = DataLoader(TensorDataset(torch.randint(0, VOCAB, (12, SEQ))), batch_size=4)  # 3 batches
test = DataLoader(TensorDataset(torch.randint(0, VOCAB, (8, SEQ))), batch_size=4)  # 2 batches


def evaluate(loader) -> int:
    model.eval()
    n = 0
    with torch.no_grad():
        for (ids,) in loader:
            model(ids)
            n += 1
    model.train()
    return n


for i in range(steps):
    ids, labels = batch(i, 8, "cpu")
    torch.nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()
    opt.zero_grad()
passes = [evaluate(val), evaluate(val), evaluate(test)]  # the last validation, the final one, a test
truth(steps=steps, eval_phases=len(passes), eval_batches=passes)
