"""Lightning checkpointing as its users do: ModelCheckpoint every 3 training steps over 6 (each through
Trainer.save_checkpoint, which calls torch.save inside), then one trainer.save_checkpoint of the user's
own. Args: OUT_DIR."""

import os
import sys

import lightning.pytorch as pl
import torch
from torch import nn


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 1)

    def training_step(self, batch, i):
        return self.lin(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


out = sys.argv[1]
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 16)), batch_size=8)
every = pl.callbacks.ModelCheckpoint(dirpath=out, every_n_train_steps=3, save_top_k=-1, filename="{step}")
trainer = pl.Trainer(max_steps=6, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, callbacks=[every])
trainer.fit(Model(), data)
trainer.save_checkpoint(os.path.join(out, "final.ckpt"))
