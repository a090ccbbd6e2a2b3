"""A hand-written data-parallel loop over gloo for the many-node tests (no DDP: the gradients are
all-reduced by `dist.all_reduce` after the backward, as many hand-written loops and gradient clipping do),
one launch per node under torchrun. One node computes longer at a place that a file says, switched live:

ND_SLOW_NODE=N    node N's (SLURM_NODEID, else GROUP_RANK) ranks take ND_SLOW_FACTOR (default 3) times the
                  others' time a step, the extra at the place ND_CONTROL/place names (read at every step):
                  "data"            the DataLoader's batch comes late (before the forward)
                  "after-backward"  between the backward and the gradients' all_reduce
                  "collective"      inside a collective: the per-step all_gather_object of the loss, whose
                                    object pickles slowly on that node
                  anything else     nowhere: a clean job
ND_STEP_S         every rank's own compute a step (default 0.04 s), before the forward
ND_CONTROL=DIR    DIR/stop ends every rank

Every rank runs the same collectives in the same order at every step, whatever the place.
"""

import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

dist.init_process_group("gloo")
rank, node = dist.get_rank(), int(os.environ.get("SLURM_NODEID", os.environ["GROUP_RANK"]))
control = os.environ["ND_CONTROL"]
base = float(os.environ.get("ND_STEP_S", "0.04"))
slow = os.environ.get("ND_SLOW_NODE") == str(node)
extra = base * (float(os.environ.get("ND_SLOW_FACTOR", "3")) - 1) if slow else 0.0
place = ["none"]  # this step's place of the extra time


def read_place() -> str:
    try:
        with open(os.path.join(control, "place")) as f:
            return f.read().strip()
    except OSError:
        return "none"


class Batches(Dataset):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i):
        if place[0] == "data":
            time.sleep(extra)
        return torch.randn(8, 16)


class Loss:
    """What the ranks gather each step; it pickles slowly on the slow node when the place is the collective."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __reduce__(self):
        if place[0] == "collective":
            time.sleep(extra)
        return (Loss, (self.value,))


model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for p in model.parameters():  # the same start on every rank
    dist.broadcast(p.data, 0)
losses = [None] * dist.get_world_size()
step = 0
for x in DataLoader(Batches(), batch_size=None):
    if os.path.exists(os.path.join(control, "stop")):
        break
    time.sleep(base)  # every rank's own compute
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    if place[0] == "after-backward":
        time.sleep(extra)
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    dist.all_gather_object(losses, Loss(loss.item()))
    opt.step()
    step += 1
    place[0] = read_place() if slow else "none"
    if step % 50 == 0 and rank == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
