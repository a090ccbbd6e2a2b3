"""A real gloo hang under torchrun with PyTorch's Flight Recorder on (TORCH_FR_BUFFER_SIZE): three
all_reduces, then rank 1 stops taking part (it sleeps) while rank 0 enters a fourth. Each rank dumps
its Flight Recorder as JSON (torch's own _dump_fr_trace_json) into FR_DIR/rank<N>.json while the
hang lasts: torch 2.9 writes no dump on a gloo timeout itself, so the program takes it, as a
watchdog of the user's would. Rank 0's collective then times out (gloo, 4 s) and both exit 0."""

import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace_json

dist.init_process_group("gloo", timeout=timedelta(seconds=4))
rank = dist.get_rank()
x = torch.ones(4)
for _ in range(3):
    dist.all_reduce(x)


def dump() -> None:
    time.sleep(2.0)  # 1 s was once too soon on a loaded machine: rank 1's #3 not yet marked completed
    out = os.path.join(os.environ["FR_DIR"], f"rank{rank}.json")
    with open(out + ".tmp", "wb") as f:
        f.write(_dump_fr_trace_json(includeCollectives=True))
    os.replace(out + ".tmp", out)


watch = threading.Thread(target=dump)
watch.start()
if rank == 1:
    watch.join()
    time.sleep(4.5)  # rank 0 times out first
    sys.exit(0)
try:
    dist.all_reduce(x)
except RuntimeError as e:
    print("rank 0:", str(e)[:120], flush=True)
watch.join()
