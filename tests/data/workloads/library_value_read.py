"""XLA on the CPU: a value read inside a library function (the stand-in transformers of
tests/data/fake_framework on PYTHONPATH: its model's forward calls masking_utils, which reads the
mask's value on the host), a few steps with an optimizer and a sync at each step's end. Prints
torch_xla's own count of its compiles."""

import json

import torch
import torch_xla
import torch_xla.debug.metrics as met
from transformers.modeling_tiny import TinyModel

device = torch_xla.device()
model = TinyModel().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(6):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(i)).to(device)
    mask = torch.ones(4, 8, dtype=torch.long).to(device)
    model(x, mask).sum().backward()  # the user's line
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
print("pattern-truth: " + json.dumps({"steps": 6, "xla_compiles": met.counter_value("UncachedCompile")}), flush=True)
