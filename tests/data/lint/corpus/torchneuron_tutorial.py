"""TorchNeuron eager training in the shape of the "Train a simple model on Neuron" tutorial (issue 50):
a GPT-2 block on the native neuron device, warm-up then cosine learning rate, gradient clipping, the
first loss kept once, a loss line every 5 steps, torch.save every 20 steps, and torch.compile with the
neuron backend when asked. Its reads are host syncs on TorchNeuron, not graph breaks."""
import math
import sys

import torch
import torch_neuronx  # noqa: F401

device = "neuron"
model = GPT2().to(device)
if "--compile" in sys.argv:
    model = torch.compile(model, backend="neuron")
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
warmup, total = 10, 200


def lr_at(it):
    if it < warmup:
        return 3e-4 * (it + 1) / warmup
    progress = (it - warmup) / max(1, total - warmup)
    return 3e-5 + 0.5 * (3e-4 - 3e-5) * (1 + math.cos(math.pi * progress))


first_loss = None
for it, (x, y) in enumerate(loader):
    for group in optimizer.param_groups:
        group["lr"] = lr_at(it)
    x, y = x.to(device), y.to(device)
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if it == 0:
        first_loss = loss.item()  # expect: item
    if it % 5 == 0:
        print(f"step {it:4d} | loss {loss.item():.4f} | lr {lr_at(it):.2e}")  # expect: item
    if it % 20 == 0:
        torch.save({"model": model.state_dict(), "step": it}, f"ckpt_{it}.pt")
    if it + 1 == total:
        break
print(f"done: {total} steps, loss {first_loss:.4f} -> {loss.item():.4f}")
