"""A TorchNeuron-shaped eager training script (issue 44): a model on the ``neuron`` device, its
batch size 4, then 8 from step 20 to 24, then 4 again (a shape that comes back). With argv[1], it
writes there what TorchNeuron counted after each step (the NEFF compiles so far and their seconds),
the truth the tests hold neurondesk's figures to. Prints a line every 10 steps."""

import json
import sys

import torch
import torch_neuronx
import torch_neuronx.metrics as met

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
    data = met.get_metric_data("CompilationCache.CompilationTime") or {}
    truth.append({"step": step, "compiles": met.get_counter_value("CompilationCache.TotalCompilations") or 0,
                  "seconds": data.get("accumulator", 0.0) / 1e9})
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
print(f"done on {next(model.parameters()).device} with torch_neuronx {torch_neuronx.__version__}", flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f)
