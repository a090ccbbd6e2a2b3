"""Synthetic token data: a plain make_batch and a seeded, index-deterministic DataLoader."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset


def _labels(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    # A fixed token->token mapping: random-looking ints, but learnable, so the loss curve goes down
    # and a --target-loss can actually be reached.
    return (ids * 7 + 3) % vocab


def make_batch(batch_size=8, seq_len=512, vocab=32000, device="cpu", generator=None):
    """(ids, labels), both int64 [batch_size, seq_len]. Generated on CPU then moved, so the
    same generator gives the same tokens whatever the device."""
    ids = torch.randint(0, vocab, (batch_size, seq_len), generator=generator)
    return ids.to(device), _labels(ids, vocab).to(device)


def dynamic_seq_lens(seq_len: int, n: int, seed: int) -> list[int]:
    """Per-step sequence lengths for the --dynamic-shape trap: random in [seq_len/4, seq_len]."""
    g = torch.Generator().manual_seed(seed + 1)
    lo = max(1, seq_len // 4)
    return torch.randint(lo, seq_len + 1, (n,), generator=g).tolist()


def batch_seed(seed: int, i: int) -> int:
    return seed * 1_000_003 + i


class RandomTokenDataset(Dataset):
    """Item i is a whole batch, generated from a generator seeded by (seed, i): the data order
    is reproducible and independent of num_workers. Use with DataLoader(batch_size=None)."""

    def __init__(self, num_batches, batch_size=8, seq_len=512, vocab=32000, seed=0, seq_lens=None,
                 delay_ms=0.0):
        self.num_batches = num_batches
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.vocab = vocab
        self.seed = seed
        self.seq_lens = seq_lens  # optional per-index lengths (dynamic shapes)
        self.delay_ms = delay_ms

    def __len__(self):
        return self.num_batches

    def __getitem__(self, i):
        if not 0 <= i < self.num_batches:
            raise IndexError(i)
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000.0)  # stand-in for a slow decode/tokenize pipeline
        g = torch.Generator().manual_seed(batch_seed(self.seed, i))
        seq_len = self.seq_lens[i] if self.seq_lens else self.seq_len
        return make_batch(self.batch_size, seq_len, self.vocab, generator=g)


def make_loader(num_batches, batch_size=8, seq_len=512, vocab=32000, seed=0, num_workers=0,
                delay_ms=0.0, seq_lens=None, pin_memory=False):
    ds = RandomTokenDataset(num_batches, batch_size, seq_len, vocab, seed, seq_lens, delay_ms)
    # batch_size=None: the dataset already yields whole batches.
    return DataLoader(ds, batch_size=None, shuffle=False, num_workers=num_workers, pin_memory=pin_memory)
