"""A clean XLA script: values read in step closures, evaluation after training, host values only printed."""
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch.utils.data import DataLoader

device = torch_xla.device()
model = Model().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
sched = torch.optim.lr_scheduler.StepLR(opt, 10)
loader = DataLoader(ds, batch_size=32, shuffle=True, drop_last=True)
max_len = 128
warmup = 100
for epoch in range(3):
    epoch_loss = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        if x is None:
            continue
        x, y = x[:, :max_len].to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        epoch_loss += loss.detach()
        lr = sched.get_last_lr()[0]
        if step > warmup:
            sched.step()
        xm.add_step_closure(lambda: print(f"loss {loss.item():.4f} lr {lr}"))
        print(f"step {step} of {len(loader)}")
    print(f"epoch {epoch} loss {epoch_loss}")

model.eval()
total = 0.0
with torch.no_grad():
    for x, y in val_loader:
        total += torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).item()
print(total / len(val_loader))
model.cpu()
torch.save(model.state_dict(), "model.pt")
