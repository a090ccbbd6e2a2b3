"""Variable-length sequences: a pad_sequence collate and a cut to the batch's longest."""
import torch
import torch_xla
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

device = torch_xla.device()


def collate(items):
    ids = pad_sequence([x for x, _ in items], batch_first=True)  # expect: pad-sequence
    lengths = torch.tensor([len(x) for x, _ in items])
    return ids, lengths


loader = DataLoader(ds, batch_size=8, collate_fn=collate, drop_last=True)
model = Model().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for ids, lengths in loader:
    max_len = lengths.max()
    ids = ids[:, :max_len].to(device)  # expect: per-batch-slice
    fixed = ids[:, :512]
    loss = model(fixed).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
