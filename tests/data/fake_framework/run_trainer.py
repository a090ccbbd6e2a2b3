import torch
import torch_xla
from transformers import Trainer

model = torch.nn.Linear(8, 2).to(torch_xla.device())
Trainer(model).train()  # the user's line
print("done", flush=True)
