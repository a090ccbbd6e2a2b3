"""eager_shapes.py's loop (batch 4, 8 from step 20 to 24, then 4 again) for runs where TorchNeuron's
metrics cannot be read (off, or renamed): the truth it writes (argv[1]) is the double's own count of
the NEFFs it compiled after each step (torch_neuronx._cache.COMPILED), which the metrics do not need."""

import json
import sys

import torch
import torch_neuronx
from torch_neuronx import _cache

STEPS = 30
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
truth = []
for step in range(STEPS):
    bs = 8 if 20 <= step < 25 else 4
    x = torch.randn(bs, 16).to("neuron")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    truth.append({"step": step, "compiles": len(_cache.COMPILED)})
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
print(f"done on {next(model.parameters()).device} with torch_neuronx {torch_neuronx.__version__}", flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f)
