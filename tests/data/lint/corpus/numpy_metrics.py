"""Metrics with numpy every step: host copies of predictions and targets."""
import numpy as np
import torch
import torch_xla
from sklearn.metrics import f1_score
from torch.utils.data import DataLoader

device = torch_xla.device()
model = Classifier().to(device)
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(ds, batch_size=64, drop_last=False)  # expect: drop-last
all_preds = []
for x, y in loader:
    x, y = x.to(device), y.to(device)
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
    preds = out.argmax(-1).cpu().numpy()  # expect: host-copy
    targets = y.tolist()  # expect: host-copy
    all_preds.append(preds)
    scores = np.array([1, 2, 3]).tolist()
print(f1_score(np.concatenate(all_preds), targets, average="macro"))
