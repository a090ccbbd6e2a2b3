"""A model of the library whose forward calls into another of its files (masking_utils.py)."""

import torch

from .masking_utils import mask_has_no_padding


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 2)

    def forward(self, x, mask):
        y = self.linear(x)
        if not mask_has_no_padding(mask):
            y = y * mask[:, :1]
        return y
