"""Trainer's shape: the user calls train(); the loop, its sync and an evaluation that concatenates
results on the device (a new graph per batch) are the framework's."""

import torch
import torch_xla


class Trainer:
    def __init__(self, model, steps: int = 4) -> None:
        self.model, self.steps = model, steps
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train(self) -> None:
        device = torch_xla.device()
        for i in range(self.steps):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(i)).to(device)
            self.model(x).sum().backward()
            self.opt.step()
            self.opt.zero_grad()
            torch_xla.sync()
        self.evaluation_loop(device)

    def evaluation_loop(self, device) -> None:
        self.model.eval()
        preds = None
        with torch.no_grad():
            for i in range(3):
                out = self.model(torch.ones(2, 8).to(device) * i)
                preds = out if preds is None else torch.cat([preds, out])  # grows: a new graph each batch
                torch_xla.sync()
