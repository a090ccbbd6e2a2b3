"""A TorchNeuron-shaped torch.compile script (issue 44): ``torch.compile(backend="neuron")`` of a
small model on the CPU (the double's backend runs the graphs eagerly), trained 12 steps, its batch
size 4 then 6 from step 6 (dynamo compiles again). Prints a line at the end."""

import torch
import torch_neuronx  # noqa: F401 - the neuron backend, its metrics

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
compiled = torch.compile(model, backend="neuron", fullgraph=True)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(12):
    x = torch.randn(4 if step < 6 else 6, 8)
    loss = compiled(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"done, loss {loss.item():.4f}", flush=True)
