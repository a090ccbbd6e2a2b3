"""The torch-xla MNIST tutorial shape: MpDeviceLoader, xm.optimizer_step, a step closure for logging."""
import torch
import torch.nn as nn
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader

device = xm.xla_device()
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to(device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
train_loader = DataLoader(train_dataset, batch_size=64, shuffle=True, drop_last=True)


def _train_update(step, loss):
    print(f"step {step} loss {loss.item():.4f}")


def train_loop_fn(loader, epoch):
    model.train()
    for step, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        output = model(data)
        loss = loss_fn(output, target)
        loss.backward()
        xm.optimizer_step(optimizer)
        if step % 20 == 0:
            xm.add_step_closure(_train_update, args=(step, loss))


for epoch in range(1, 3):
    para_loader = pl.MpDeviceLoader(train_loader, device)
    train_loop_fn(para_loader, epoch)
    print(f"epoch {epoch} done")
