"""Ranks each compiling into a NEFF cache folder of its own (issue 52 item 4), as pods without a
shared volume do: each rank sets TORCH_NEURONX_NEFF_CACHE_DIR to argv[1]/rank<RANK> before TorchNeuron
loads, then trains 6 eager steps (no collective: the same program on each rank)."""

import os
import sys

# NEURONDESK_TEST_SAME_RANK_FOLDER=1: every rank in argv[1]/rank0 (one shared folder), for the contrast
rank = "0" if os.environ.get("NEURONDESK_TEST_SAME_RANK_FOLDER") else os.environ.get("RANK", "0")
os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = os.path.join(sys.argv[1], f"rank{rank}")

import torch  # noqa: E402
import torch_neuronx  # noqa: E402, F401

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    loss = model(torch.randn(4, 16).to("neuron")).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"rank {os.environ.get('RANK')} done", flush=True)
