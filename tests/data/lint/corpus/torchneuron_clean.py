"""TorchNeuron done right: the native neuron device, batches padded to one length, torch.compile with
the neuron backend, its default mode and static shapes (fullgraph=True, as recommended)."""
import torch
import torch.nn.functional as F
import torch_neuronx  # noqa: F401

model = LM().to("neuron")
compiled = torch.compile(model, backend="neuron", fullgraph=True, mode="default")
optimizer = torch.optim.AdamW(model.parameters())
for step, ids in enumerate(loader):
    ids = F.pad(ids, (0, 512 - ids.shape[1])).to("neuron")
    loss = compiled(ids).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
