"""XLA on the CPU: a value read inside a library function (the stand-in transformers of
tests/data/fake_framework on PYTHONPATH: its model's forward calls masking_utils, which reads the
mask's value on the host), a few steps with an optimizer, batches through torch_xla's
MpDeviceLoader (whose next batch syncs each step's graph), then a graph the user's own
torch_xla.sync() runs. Prints torch_xla's own count of its compiles."""

import json

import torch
import torch_xla
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
from transformers.modeling_tiny import TinyModel

device = torch_xla.device()
model = TinyModel().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(8, generator=torch.Generator().manual_seed(i)), torch.ones(8, dtype=torch.long)) for i in range(24)]
for x, mask in pl.MpDeviceLoader(torch.utils.data.DataLoader(data, batch_size=4), device):
    model(x, mask).sum().backward()  # the user's line
    opt.step()
    opt.zero_grad()
total = sum(p.sum() for p in model.parameters())
torch_xla.sync()  # the user's sync
print("pattern-truth: " + json.dumps({"steps": 6, "xla_compiles": met.counter_value("UncachedCompile"),
                                      "total": total.item()}), flush=True)
