"""A stock Lightning run: fit with validation every epoch, then test and predict (eager CPU, a tiny
LightningModule, data made here). Prints its own truth: optimizer steps, batches of each stage, each
training step's loss.

    python lightning_fit.py
"""

import json
import os
import sys
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

EPOCHS, TRAIN_BATCHES, VAL_BATCHES, TEST_BATCHES, PRED_BATCHES, BATCH = 2, 6, 2, 3, 2, 4


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

    def test_step(self, batch, i):
        x, y = batch
        self.log("test_loss", torch.nn.functional.mse_loss(self(x), y))

    def predict_step(self, batch, i):
        return self(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Losses(L.Callback):
    """The truth of each training step's loss, as the step returned it."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.values.append(outputs["loss"].item())


def loader(batches: int, seed: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batches * BATCH, 8, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=BATCH)


def main() -> int:
    warnings.filterwarnings("ignore")
    os.environ.setdefault("PL_DISABLE_FORK", "1")
    L.seed_everything(0, verbose=False)
    model = Tiny()
    trainer = L.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        num_sanity_val_steps=0, enable_model_summary=False, log_every_n_steps=1,
                        callbacks=[losses := Losses()])
    trainer.fit(model, loader(TRAIN_BATCHES, 1), loader(VAL_BATCHES, 2))
    trainer.test(model, loader(TEST_BATCHES, 3), verbose=False)
    trainer.predict(model, loader(PRED_BATCHES, 4))
    print("pattern-truth: " + json.dumps({
        "steps": trainer.global_step, "train_samples": trainer.global_step * BATCH, "losses": losses.values,
        "eval_batches": [VAL_BATCHES] * EPOCHS + [TEST_BATCHES, PRED_BATCHES]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
