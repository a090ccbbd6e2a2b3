"""TinyModel: the seed tutorial's small transformer (embedding -> encoder -> vocab head)."""

from __future__ import annotations

from torch import nn


class TinyModel(nn.Module):
    def __init__(
        self,
        vocab: int = 32000,
        d_model: int = 512,
        nhead: int = 8,
        num_layers: int = 4,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, batch_first=True)
        # enable_nested_tensor only matters with padding masks; off avoids a warning and a CPU fast path.
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
