"""An eager training loop on the CPU that logs a held-out loss every step, for SECONDS seconds.
``--keep tensor`` appends that loss tensor itself to a list: computed with autograd on and never
backpropagated, it keeps its whole graph (the activations its forward saved), so the host RSS grows
step after step (the classic leak: the loss kept without .item() / .detach()). ``--keep item``
appends ``loss.item()``, a float: nothing grows. Under torchrun, ``--leak-rank N`` keeps tensors on
rank N only (the ranks train apart: no collective), the others keep floats.

    python leaky_losses.py --keep tensor|item [--seconds 32] [--leak-rank N]
"""

import argparse
import os
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--keep", choices=("tensor", "item"), required=True)
parser.add_argument("--seconds", type=float, default=32.0)
parser.add_argument("--leak-rank", type=int, default=None)
args = parser.parse_args()
keep_tensor = args.keep == "tensor" and args.leak_rank in (None, int(os.environ.get("RANK", "0")))

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x, y = torch.randn(256, 256), torch.randn(256, 1)
x_held, y_held = torch.randn(256, 256), torch.randn(256, 1)
held_out = []
end = time.monotonic() + args.seconds
step = 0
while time.monotonic() < end:
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    held_out_loss = torch.nn.functional.mse_loss(model(x_held), y_held)
    if keep_tensor:
        held_out.append(held_out_loss)
    else:
        held_out.append(held_out_loss.item())
    step += 1
    time.sleep(0.03)
print(f"leaky_losses kept {len(held_out)} held-out losses over {step} steps", flush=True)
