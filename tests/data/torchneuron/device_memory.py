"""A TorchNeuron eager training script for device memory (issue 52 item 3): a model on ``neuron``,
0.25 s a step. With ``--leak MIB`` it keeps a ``MIB`` MiB device tensor each step (a list that only
grows), so that the double's device (TORCHNEURON_DOUBLE_HBM_BYTES) runs out: TorchNeuron's OOM
("NRT allocation failed for size N (OOM)") ends the script. argv[1]: where to write what
torch_neuronx.memory.memory_stats() said after each step (the truth the tests hold neurondesk to)."""

import json
import sys
import time

import torch
import torch_neuronx

STEPS = 12
leak_mib = int(sys.argv[sys.argv.index("--leak") + 1]) if "--leak" in sys.argv else 0
truth_path = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept, truth = [], []
try:
    for step in range(STEPS):
        x = torch.randn(4, 16).to("neuron")
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if leak_mib:
            kept.append(torch.zeros(leak_mib << 18, device="neuron"))  # float32: MiB << 18 elements
        stats = torch_neuronx.memory.memory_stats()
        truth.append({"step": step, "allocated_peak": stats["allocated_bytes"]["peak"],
                      "reserved_peak": stats["reserved_bytes"]["peak"], "ooms": stats["num_ooms"]})
        time.sleep(0.25)
finally:
    with open(truth_path, "w") as f:
        json.dump(truth, f)
print("done", flush=True)
