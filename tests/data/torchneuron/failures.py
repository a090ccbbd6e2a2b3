"""TorchNeuron's failures (issue 44 item 6), one per flag, on the TorchNeuron double:
``--dynamic`` torch.compile(backend="neuron", dynamic=True) (rejected: NCC_EMOD025, the script dies);
``--mode M`` torch.compile(backend="neuron", mode=M) (a warning, default used); ``--compiled``
torch.compile(backend="neuron") (with TORCHNEURON_DOUBLE_GRAPH_FAIL=1 its graphs fail on the device);
otherwise eager, where TORCHNEURON_DOUBLE_CPU_FALLBACK names ops run on the CPU (``nonzero`` is used).
Trains 6 steps and prints a line at the end."""

import argparse

import torch
import torch_neuronx  # noqa: F401 - the neuron device and backend

parser = argparse.ArgumentParser()
parser.add_argument("--dynamic", action="store_true")
parser.add_argument("--mode")
parser.add_argument("--compiled", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
if args.dynamic or args.mode or args.compiled:
    kwargs = {"dynamic": True} if args.dynamic else {"mode": args.mode} if args.mode else {}
    run = torch.compile(model, backend="neuron", **kwargs)
    device = "cpu"
else:
    model = model.to("neuron")
    run, device = model, "neuron"
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(6):
    x = torch.randn(4, 8).to(device)
    loss = run(x).pow(2).mean()
    if device == "neuron":
        loss = loss + 0 * torch.nonzero(x > 0).shape[0]
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"done, loss {loss.item():.4f}", flush=True)
