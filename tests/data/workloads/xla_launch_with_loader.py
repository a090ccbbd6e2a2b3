"""torch_xla.launch runs the training function in a child process (multiprocessing spawn, like a
DataLoader worker); that child trains with a DataLoader of one worker whose items take 80 ms, so
the loop waits for data. argv[1]: steps (default 60)."""

import sys
import time

import torch
import torch_xla


class SlowItems(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int):
        time.sleep(0.08)
        x = torch.randn(16)
        return x, x.sum(0, keepdim=True)


def train(index: int) -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    dev = torch_xla.device()
    model = torch.nn.Linear(16, 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowItems(), batch_size=1, num_workers=1)
    for i, (x, y) in enumerate(loader):
        if i >= steps:
            break
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        torch_xla.sync()


if __name__ == "__main__":
    torch_xla.launch(train, args=())
