"""Train until the loss is under a target: the while test reads the loss every step."""
import torch
import torch_xla

device = torch_xla.device()
model = Model().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
loss = torch.tensor(10.0, device=device)
target = 0.1
steps = 0
while loss > target:  # expect: tensor-branch
    x, y = sample(device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    history.append(float(loss))  # expect: tensor-cast
    steps += 1
    if steps > 10_000:
        break
