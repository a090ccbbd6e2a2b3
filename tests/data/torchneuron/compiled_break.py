"""A TorchNeuron-shaped torch.compile script with a graph break and a recompile (issue 44 item 4):
``torch.compile(backend="neuron")`` of a small model whose forward prints (a graph break: two
graphs, each with its forward and backward), its batch size 4 then 6 from step 15 (dynamo compiles
again), 20 steps on the CPU (the double's backend runs the graphs eagerly)."""

import torch
import torch_neuronx  # noqa: F401 - the neuron backend, its metrics


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(8, 16)
        self.second = torch.nn.Linear(16, 1)

    def forward(self, x):
        h = torch.relu(self.first(x))
        print("forward", tuple(h.shape))
        return self.second(h)


torch.manual_seed(0)
model = Model()
compiled = torch.compile(model, backend="neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    x = torch.randn(4 if step < 15 else 6, 8)
    loss = compiled(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"done, loss {loss.item():.4f}", flush=True)
