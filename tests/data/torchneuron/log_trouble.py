"""eager_shapes.py's training, with trouble in TorchNeuron's log file (issue 44's bad input):
``--split-line``: at step 5 a NEFF cache line written in two halves, a second apart;
``--delete-log N``: the log file (TORCH_NEURONX_LOG_FILE) deleted at step N (TorchNeuron writes on
into it); ``--cut-line``: at the end, half a line and no more (into the file then at the path).
Prints a line every 10 steps and its own count of NEFF compiles at the end."""

import argparse
import os
import time

import torch
import torch_neuronx.metrics as met

p = argparse.ArgumentParser()
p.add_argument("--split-line", action="store_true")
p.add_argument("--delete-log", type=int, default=None)
p.add_argument("--cut-line", action="store_true")
args = p.parse_args()
log = os.environ["TORCH_NEURONX_LOG_FILE"]


def append(text: str) -> None:
    with open(log, "a") as f:
        f.write(text)


model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(30):
    if args.split_line and step == 5:
        append("[Neuron] [INFO] [test:1] [NEFF_CACHE] Cache MI")
        time.sleep(1.0)  # the reader sees the half line first, whenever it reads
        append("SS for key: 00halfwritten00 \n")
    if step == args.delete_log:
        os.remove(log)
    x = torch.randn(8 if step >= 20 else 4, 16).to("neuron")
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
    if step % 10 == 0:
        print(f"step {step}", flush=True)
if args.cut_line:
    append("[Neuron] [INFO] [test:2] [NEFF_CACHE] Storing NEFF fo")
print(f"compiles {met.get_counter_value('CompilationCache.TotalCompilations')}", flush=True)
