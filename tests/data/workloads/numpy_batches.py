"""A small eager-torch training loop whose DataLoader collates into numpy arrays, the way many
scripts do (a `collate_fn` that returns `np.stack`ed arrays, in a dict or a tuple). Runs without
neurondesk as it runs under it; prints one line per step and a last line with its step count.

    python numpy_batches.py STEPS {array,dict,tuple,odd}
"""

import sys

import numpy as np
import torch
from torch.utils.data import DataLoader

steps, form = int(sys.argv[1]), sys.argv[2]
BATCH, SEQ = 4, 8


class Odd:
    """Something of the user's own with a `shape` that is no tensor shape."""

    shape = ("batch", "seq")
    dtype = "tokens"


def collate(items):
    ids = np.stack([np.full(SEQ, i % 50, dtype=np.int64) for i in items])  # 2-D int64: token ids
    if form == "array":
        return ids
    if form == "dict":
        return {"input_ids": ids, "mask": np.ones((len(items), SEQ), dtype=np.bool_)}
    if form == "tuple":
        return (ids, np.zeros(len(items), dtype=np.float32))
    return (Odd(), ids)


def ids_of(batch):
    if isinstance(batch, dict):
        return batch["input_ids"]
    if isinstance(batch, tuple):
        return batch[0] if form == "tuple" else batch[1]
    return batch


loader = DataLoader(list(range(steps * BATCH)), batch_size=BATCH, collate_fn=collate)
model = torch.nn.Sequential(torch.nn.Embedding(50, 4), torch.nn.Flatten(), torch.nn.Linear(4 * SEQ, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
done = 0
for batch in loader:
    loss = model(torch.from_numpy(ids_of(batch))).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"numpy-batches step {done} loss {loss.item():.4f}", flush=True)
    done += 1
print(f"numpy-batches done: {done} steps", flush=True)
