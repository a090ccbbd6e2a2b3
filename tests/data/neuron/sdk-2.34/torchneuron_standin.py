"""A stand-in for a TorchNeuron training script (composed, issue 27): two torch.compile graphs on
the CPU (backend="eager"), and at exit what torch-neuronx does with
TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats and TORCH_NEURONX_METRICS_DIR: one row per graph in
DIR/metric_table_graph_stats_rank{RANK}.csv, the documented columns, times composed."""

import atexit
import os
import time

import torch

COLUMNS = ("graph_id,graph_name,model_name,has_collectives,graph_node_count,timestamp,"
           "torch_neuronx_fx_passes_us,torch_neuronx_lower_us,torch_neuronx_compile_us")
compiled: list[tuple[str, float]] = []


@torch.compile(backend="eager", dynamic=False)
def step(x):
    return (x * 2 + 1).sum()


def write_tables() -> None:
    if "graph_stats" not in os.environ.get("TORCH_NEURONX_ENABLED_METRIC_TABLES", "").split(","):
        return
    folder = os.environ["TORCH_NEURONX_METRICS_DIR"]
    rank = os.environ.get("RANK", "0")
    with open(os.path.join(folder, f"metric_table_graph_stats_rank{rank}.csv"), "w") as f:
        f.write(COLUMNS + "\n")
        for i, (gid, ts) in enumerate(compiled):
            f.write(f"{gid},graph_{i},standin,False,{10 + i},{ts:.6f},{1000 * (i + 1)},{2000 * (i + 1)},"
                    f"{300000 * (i + 1)}\n")


atexit.register(write_tables)
for n in (4, 8):  # a new shape: a second graph
    step(torch.ones(n))
    compiled.append((f"g{n:04d}", time.time()))
print("done", flush=True)
