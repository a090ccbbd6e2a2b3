"""A small-GPT trainer's loop (get_batch, iter_num, log_interval) compiled for the neuron backend."""
import torch
import torch_xla

max_iters, log_interval, eval_interval = 5000, 10, 250
model = GPT(config)
model = torch.compile(model, backend="neuron", dynamic=True)  # expect: dynamic-neuron
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95))


@torch.no_grad()
def estimate_loss():
    out = {}
    for split in ("train", "val"):
        losses = torch.zeros(20)
        for k in range(20):
            X, Y = get_batch(split)
            logits, loss = model(X, Y)
            losses[k] = loss.item()  # expect: item
        out[split] = losses.mean()
    return out


for iter_num in range(max_iters):
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}")
    X, Y = get_batch("train")
    logits, loss = model(X, Y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch_xla.sync()
    if iter_num % log_interval == 0:
        lossf = loss.item()  # expect: item
        print(f"iter {iter_num}: loss {lossf:.4f}")
