"""A random sequence length each step (curriculum or a data bug): a new graph per length."""
import random

import torch
import torch_xla

device = torch_xla.device()
model = Model().to(device)
opt = torch.optim.AdamW(model.parameters())
for step in range(1000):
    seq_len = random.randint(32, 128)
    ids = full_ids[step % 100][:, :seq_len].to(device)  # expect: per-batch-slice
    loss = model(ids).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
