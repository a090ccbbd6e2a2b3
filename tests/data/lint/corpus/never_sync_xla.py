"""A GPU loop moved to XLA by changing the device only: nothing cuts the graph."""
import torch
import torch_xla.core.xla_model as xm

device = xm.xla_device()
model = Model().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(100):  # expect: no-sync
    x = torch.randn(16, 32, device=device)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(loss)  # expect: print-tensor
