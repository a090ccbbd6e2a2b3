"""The step in a function, metrics in a helper it calls, the loop in another function."""
import torch
import torch_xla


def log_metrics(step, loss, preds, labels):
    acc = (preds == labels).float().mean().item()  # expect: item
    print(f"step {step} loss={loss:.3f} acc={acc:.3f}")  # expect: fstring-tensor


def train_step(model, batch, optimizer, step):
    ids, labels = batch
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    log_metrics(step, loss, logits.argmax(-1), labels)
    return loss


def main():
    device = torch_xla.device()
    model = Model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, batch in enumerate(train_batches(device)):
        train_step(model, batch, optimizer, step)
        torch_xla.sync()
        if step == 10:
            print("ten steps")


main()
