"""A stock Lightning fit under DDP (strategy "ddp", gloo, on the CPU; launched by torchrun, which Lightning
takes as its cluster environment), one rank of which computes longer at a place this script is told.
Lightning makes the collectives: DDP's gradient all-reduce in the backward, `self.log(..., sync_dist=True)`'s
all_reduce at every step, its own barriers.

ND_SLOW_RANK=N    global rank N takes ND_SLOW_FACTOR (default 3) times the others' time a step, the extra at
                  ND_SLOW_PLACE: "after-backward" (in on_before_optimizer_step, after DDP's all-reduce, as
                  gradient clipping or a logging hook that synchronises), "forward" (in training_step, before
                  the forward); unset: nowhere (a clean job)
ND_STEP_S         every rank's own compute a step (default 0.03 s), in training_step
ND_STEPS          optimizer steps (default 80)

    torchrun --nproc-per-node 2 lightning_ddp_slow.py
"""

import os
import time
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

BATCH = 4
BASE = float(os.environ.get("ND_STEP_S", "0.03"))
STEPS = int(os.environ.get("ND_STEPS", "80"))
SLOW = os.environ.get("ND_SLOW_RANK") == os.environ.get("RANK")
EXTRA = BASE * (float(os.environ.get("ND_SLOW_FACTOR", "3")) - 1) if SLOW else 0.0
PLACE = os.environ.get("ND_SLOW_PLACE", "none")


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, i):
        time.sleep(BASE + (EXTRA if PLACE == "forward" else 0.0))  # every rank's own compute
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def on_before_optimizer_step(self, optimizer):
        if PLACE == "after-backward":
            time.sleep(EXTRA)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    warnings.filterwarnings("ignore")
    L.seed_everything(0, verbose=False)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS * BATCH * 2, 8, generator=g)  # each of the 2 ranks takes half
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=BATCH)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, log_every_n_steps=10)
    trainer.fit(Tiny(), data)
    if trainer.global_rank == 0:
        print(f"pattern-truth: steps {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
