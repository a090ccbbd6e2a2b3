"""A masked token loss written with boolean indexing, nonzero and masked_select."""
import torch
import torch.nn.functional as F
import torch_xla

device = torch_xla.device()
model = LM().to(device)
optimizer = torch.optim.AdamW(model.parameters())
for step in range(1000):
    ids, labels = next_batch(device)
    logits = model(ids)
    mask = labels != -100
    loss = F.cross_entropy(logits[mask], labels[mask])  # expect: data-dependent
    idx = torch.nonzero(mask)  # expect: data-dependent
    picked = logits.masked_select(mask.unsqueeze(-1))  # expect: data-dependent
    fine = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
    (loss + fine).backward()
    optimizer.step()
    optimizer.zero_grad()
    torch_xla.sync()
