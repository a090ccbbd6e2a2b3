"""What the pattern scripts share: a tiny model, seeded batches, and the truth line."""

from __future__ import annotations

import json

import torch

VOCAB, SEQ = 50, 16


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.head = torch.nn.Linear(16 * SEQ, VOCAB)

    def forward(self, ids):
        return self.head(self.emb(ids).flatten(1))


def batch(i: int, size: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(i)
    ids = torch.randint(0, VOCAB, (size, SEQ), generator=g)
    return ids.to(device), (ids[:, 0] % VOCAB).to(device)


def xla_compiles() -> int:
    import torch_xla.debug.metrics as met

    return met.counter_value("UncachedCompile") or 0


def truth(**facts) -> None:
    print("pattern-truth: " + json.dumps(facts), flush=True)
