"""torch.save in child processes: the parent saves, then a child of each multiprocessing start method
saves to METHOD.pt. Prints `child:{"method": ..., "pid": ..., "exitcode": ...}` a child. Args: OUT_DIR."""

import json
import multiprocessing as mp
import os
import sys

import torch


def child(path, pids):
    pids.put(os.getpid())
    torch.save({"x": torch.ones(3)}, path)


if __name__ == "__main__":
    out = sys.argv[1]
    torch.save({"x": torch.ones(3)}, os.path.join(out, "parent.pt"))
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        pids = ctx.Queue()
        p = ctx.Process(target=child, args=(os.path.join(out, f"{method}.pt"), pids))
        p.start()
        pid = pids.get(timeout=120)
        p.join()
        print("child:" + json.dumps({"method": method, "pid": pid, "exitcode": p.exitcode}), flush=True)
