"""Reference inference loop: torch_neuronx.trace where available, else fixed-shape XLA inference.

Each batch size in --batch-sizes is a new input shape, hence a new compile (a new trace on Neuron,
a new XLA graph elsewhere). Plain user script: it does not import neurondesk. Run e.g.
    PJRT_DEVICE=CPU python workloads/trace.py --preset demo --batch-sizes 1,8
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
from backend import Backend
from data import batch_seed, make_batch
from model import TinyModel, count_parameters
from timing import StepTimer
from train import MODEL_KEYS, PRESETS


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="seed")
    p.add_argument("--device", choices=["auto", "xla", "cuda", "cpu"], default="auto",
                   help="ignored when torch_neuronx is importable")
    p.add_argument("--batch-sizes", default="1,8", help="comma-separated; each is a new shape")
    p.add_argument("--iters", type=int, default=20, help="iterations per batch size")
    for key in ("seq_len", *MODEL_KEYS):
        p.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    args = p.parse_args(argv)
    for key in ("seq_len", *MODEL_KEYS):
        if getattr(args, key) is None:
            setattr(args, key, PRESETS[args.preset][key])
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    return args


def neuronx():
    try:
        import torch_neuronx
    except Exception:  # not installed, or installed without a Neuron runtime
        return None
    return torch_neuronx


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    tnx = neuronx()
    backend = Backend("cpu" if tnx else args.device)  # torch_neuronx takes CPU tensors in and out
    model = TinyModel(**{k: getattr(args, k) for k in MODEL_KEYS}).eval()
    n_params = count_parameters(model)
    path = "torch_neuronx.trace" if tnx else ("xla" if backend.kind == "xla" else "eager")
    if not tnx:
        model = model.to(backend.device)
    config = {
        "workload": "inference", "path": path, "preset": args.preset, "device": backend.kind,
        "device_str": str(backend.device), "device_hw": "NEURON" if tnx else backend.hw,
        "precision": "fp32", "batch_sizes": args.batch_sizes, "iters": args.iters, "seq_len": args.seq_len,
        "seed": args.seed, "data_order": "iteration i = make_batch seeded by seed*1000003+i",
        "model": {k: getattr(args, k) for k in MODEL_KEYS}, "param_count": n_params,
        "torch": torch.__version__,
    }
    print("neurondesk-config: " + json.dumps(config), flush=True)

    per_bs, step = {}, 0
    with torch.no_grad():
        for bs in args.batch_sizes:
            run = model
            if tnx:  # Neuron compiles a fixed-shape graph per input shape, ahead of the loop
                example = make_batch(bs, args.seq_len, args.vocab)[0]
                run = tnx.trace(model, example)
            timer = StepTimer(backend)
            for i in range(1, args.iters + 1):
                step += 1
                g = torch.Generator().manual_seed(batch_seed(args.seed, step - 1))
                ids, _ = make_batch(bs, args.seq_len, args.vocab, device=backend.device, generator=g)
                out = run(ids)  # noqa: F841 -- kept live so the XLA graph has an output to compute
                backend.sync()
                if step == 1 or step % args.log_every == 0:
                    print(f"step {step} batch_size {bs}", flush=True)
                timer.step_done(i, bs, ids.numel(), i == args.iters)
            backend.wait()
            per_bs[bs] = timer.report()
            print(f"batch_size {bs} done: {json.dumps(per_bs[bs])}", flush=True)
    timed = [r for r in per_bs.values() if r["steps_timed"]]
    total_s = sum(r["timed_s"] for r in timed)
    steps = sum(r["steps_timed"] for r in timed)
    samples = sum(r["samples_per_s"] * r["timed_s"] for r in timed)
    tokens = sum(r["tokens_per_s"] * r["timed_s"] for r in timed)
    summary = {
        "steady_step_time_s": total_s / steps if steps else None, "steps_timed": steps,
        "samples_per_s": samples / total_s if steps else None,
        "tokens_per_s": tokens / total_s if steps else None,
        "per_batch_size": {str(b): r for b, r in per_bs.items()},
    }
    print("workload-timing: " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
