"""transformers' Trainer checkpointing as its users do: save_steps=5 over 12 steps (checkpoint-5, -10, -12),
then a second Trainer resumed from the last checkpoint to step 14 (checkpoint-14). Args: OUT_DIR."""

import sys

import torch
from torch import nn
from transformers import Trainer, TrainingArguments


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 1)

    def forward(self, x, labels=None):
        out = self.lin(x).squeeze(-1)
        return {"loss": ((out - labels) ** 2).mean(), "logits": out}


class Data(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i):
        return {"x": torch.randn(16), "labels": torch.tensor(0.0)}


def args(steps: int, save_steps: int) -> TrainingArguments:
    return TrainingArguments(output_dir=sys.argv[1], max_steps=steps, save_steps=save_steps,
                             per_device_train_batch_size=8, report_to=[], logging_steps=100, use_cpu=True,
                             disable_tqdm=True, optim="sgd")


Trainer(model=Model(), args=args(12, 5), train_dataset=Data()).train()
Trainer(model=Model(), args=args(14, 100), train_dataset=Data()).train(resume_from_checkpoint=True)
