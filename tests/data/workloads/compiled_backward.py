"""torch.compile(model) trained a few steps: a forward compile, then the lazily compiled backward
(LAZY_BACKWARD), which autograd runs on a device thread when the device is XLA.

    python compiled_backward.py BACKEND   (aot_eager: CPU; openxla: XLA, PJRT_DEVICE=CPU)
"""

import sys

import torch

backend = sys.argv[1]
dev = torch.device("cpu")
if backend == "openxla":
    import torch_xla

    dev = torch_xla.device()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev)
compiled = torch.compile(model, backend=backend)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(4):
    loss = compiled(torch.randn(8, 16, device=dev)).square().mean()  # FORWARD
    loss.backward()  # BACKWARD
    opt.step()
    opt.zero_grad()
    if backend == "openxla":
        torch_xla.sync()
    print(f"step {i} loss {loss.item():.4f}", flush=True)
print("Final loss is 0.1234", flush=True)
