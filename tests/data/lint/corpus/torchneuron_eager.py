"""A script moved from the XLA path to TorchNeuron (the native neuron device, torch-neuronx 2.13+):
eager training whose batches are cut to their own longest length, an xm.mark_step() left behind,
and a torch.compile of the eval model with a mode TorchNeuron ignores."""
import torch
import torch_neuronx  # noqa: F401
import torch_xla.core.xla_model as xm

model = LM().to("neuron")
evaluator = torch.compile(model, backend="neuron", mode="max-autotune")  # expect: mode-neuron
optimizer = torch.optim.AdamW(model.parameters())
for step, (ids, lengths) in enumerate(loader):
    ids = ids[:, :lengths.max()].to("neuron")  # expect: per-batch-slice
    loss = model(ids).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xm.mark_step()  # expect: mark-step-neuron
