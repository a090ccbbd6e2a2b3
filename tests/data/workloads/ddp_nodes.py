"""A DDP job over gloo for the many-node tests, one launch per node under torchrun. Knobs (environment):

ND_SLOW_NODE=N    node N's (SLURM_NODEID, else GROUP_RANK) ranks compute ND_SLOW_FACTOR times as long (default 3) before the sync
ND_COMPILE_NODE=N node N compiles a torch.compile'd function before its first step (Inductor on the CPU):
                  the other node waits for it at the first all-reduce
ND_CONTROL=DIR    a file DIR/die-RANK kills that rank with SIGKILL at its next step; DIR/stop ends every rank

Steps are paced (ND_STEP_S, default 0.05 s of "compute" before the backward) and go on until stopped.
"""

import os
import signal
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
# the launch's own index (c10d's rendezvous gives GROUP_RANK in the order the nodes joined)
rank, node = dist.get_rank(), int(os.environ.get("SLURM_NODEID", os.environ["GROUP_RANK"]))
control = os.environ["ND_CONTROL"]
base = float(os.environ.get("ND_STEP_S", "0.05"))
slow = os.environ.get("ND_SLOW_NODE") == str(node)
compute_s = base * (float(os.environ.get("ND_SLOW_FACTOR", "3")) if slow else 1.0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 16)
if os.environ.get("ND_COMPILE_NODE") == str(node):
    extra = torch.compile(lambda t: (t.sin() * t.cos()).sum(dim=1).tanh())
    extra(torch.randn(8, 16))
step = 0
while not os.path.exists(os.path.join(control, "stop")) and step < 100_000:
    if os.path.exists(os.path.join(control, f"die-{rank}")):
        print(f"rank {rank} is killed at step {step}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    opt.zero_grad()
    time.sleep(compute_s)  # the node's compute before the sync
    loss = model(x).pow(2).mean()
    loss.backward()  # DDP's all-reduce: every rank waits for the slowest
    opt.step()
    step += 1
    if step % 20 == 0 and rank == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
