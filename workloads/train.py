"""Reference training loop for every backend (xla / cuda / cpu), with the tutorial's traps as flags.

Plain user script: it does not import neurondesk. Run e.g.
    PJRT_DEVICE=CPU python workloads/train.py --preset demo --steps 20
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time

import torch
import torch.nn.functional as F
from backend import Backend
from checkpoint import Checkpointer
from data import batch_seed, dynamic_seq_lens, make_batch, make_loader
from model import TinyModel, count_parameters
from ranks import discover, finish, straggle, wrap
from timing import LossLog, StepTimer

PRESETS = {
    # The seed tutorial's model and batch.
    "seed": dict(vocab=32000, d_model=512, nhead=8, num_layers=4, dim_feedforward=2048,
                 batch_size=8, seq_len=512, lr=1e-4),
    # Small enough for tens of milliseconds per step under XLA on a 2-core CPU.
    "demo": dict(vocab=1000, d_model=64, nhead=4, num_layers=2, dim_feedforward=128,
                 batch_size=8, seq_len=64, lr=1e-3),
}
MODEL_KEYS = ("vocab", "d_model", "nhead", "num_layers", "dim_feedforward")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="seed")
    p.add_argument("--device", choices=["auto", "neuron", "xla", "cuda", "cpu"], default="auto",
                   help="auto: neuron (TorchNeuron), else xla, else cuda, else cpu")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile forward+loss (backend neuron / openxla / inductor)")
    p.add_argument("--compile-backend", default=None,
                   help="torch.compile's backend instead of the device's (aot_eager: dynamo's graphs, breaks and "
                        "recompiles without Inductor's C++ compile)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--steps", type=int, default=100)
    for key in ("batch_size", "seq_len", *MODEL_KEYS):  # None = take the preset's value
        p.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    p.add_argument("--dropout", type=float, default=0.1, help="TransformerEncoderLayer's default, as in the tutorial")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--loader", action=argparse.BooleanOptionalAction, default=True,
                   help="feed batches from a DataLoader (default) or make_batch in the loop")
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--loader-delay-ms", type=float, default=0.0, help="sleep per batch: a slow input pipeline")
    p.add_argument("--xla-style", choices=["sync", "optimizer_step", "loader"], default="sync",
                   help="sync: opt.step()+torch_xla.sync(); optimizer_step: xm.optimizer_step+xm.mark_step; "
                        "loader: MpDeviceLoader (syncs on each next())")
    p.add_argument("--graph-break", choices=["item", "print", "branch"], default=None,
                   help="trap: read the loss on the host inside the step")
    p.add_argument("--dynamic-shape", action="store_true", help="trap: a new sequence length every step")
    p.add_argument("--cpu-fallback", action="store_true",
                   help="trap: an op whose output shape depends on the data (torch.unique of the batch) in each "
                        "step: TorchNeuron runs it on the CPU and copies the result back")
    p.add_argument("--target-loss", type=float, default=None, help="recorded in the config only")
    p.add_argument("--crash-at-step", type=int, default=None, help="raise RuntimeError at this step")
    p.add_argument("--crash-rank", type=int, default=None, help="with --crash-at-step: only this rank raises")
    p.add_argument("--hang-at-step", type=int, default=None,
                   help="sleep --hang-s seconds before this step's forward (under torchrun the other ranks "
                        "then wait in the all-reduce): a hang")
    p.add_argument("--hang-rank", type=int, default=None, help="with --hang-at-step: only this rank sleeps")
    p.add_argument("--hang-s", type=float, default=600.0, help="how long --hang-at-step sleeps (default 600)")
    p.add_argument("--straggler-rank", type=int, default=None, help="under torchrun: this rank is slower")
    p.add_argument("--straggler-ms", type=float, default=0.0, help="how much slower, per step")
    p.add_argument("--straggler-kind", choices=["compute", "data"], default="compute",
                   help="compute: more time in its forward; data: more time waiting for its batch")
    p.add_argument("--rank-dynamic-shape", type=int, default=None,
                   help="under torchrun: only this rank changes its sequence length every step")
    p.add_argument("--eval-every", type=int, default=0,
                   help="every N steps, evaluate: --eval-batches batches of twice the batch size under no_grad")
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--save-every", type=int, default=0,
                   help="every N steps torch.save the whole model, optimizer and an EMA deepcopy, and read it back")
    p.add_argument("--save-dir", default=None, help="where --save-every writes (default: a temporary folder)")
    args = p.parse_args(argv)
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.xla_style == "loader" and not args.loader:
        p.error("--xla-style loader wraps the DataLoader; it cannot be combined with --no-loader")
    return args


def graph_break(loss, kind):
    """The traps: each reads the loss on the host mid-step (XLA: an extra graph execution;
    torch.compile: a dynamo graph break)."""
    if kind == "item":
        loss.item()
    elif kind == "print":
        print(loss, flush=True)
    elif kind == "branch":
        if loss > 1e9:
            print("loss exploded", flush=True)


def distinct_tokens(ids):
    """The --cpu-fallback trap: the number of distinct tokens in the batch, as a bag-of-words scale.
    torch.unique's output length depends on the data, so a device that compiles ahead runs it on
    the host (TorchNeuron eager: a CPU fallback and copies each way, every step)."""
    return torch.unique(ids).numel()


def forward_loss(model, ids, labels, trap=None, slow=None):
    if slow is not None:
        slow()  # a compute straggler: its forward takes longer
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
    graph_break(loss, trap)
    return loss


def evaluate(args, backend, model, step: int) -> None:
    """An evaluation loop as real scripts write one: eval mode, no_grad, its own batch size, its own
    data, one sync per batch, the mean loss read once at the end."""
    model.eval()
    total = torch.zeros((), device=backend.device)
    with torch.no_grad():
        for j in range(args.eval_batches):
            g = torch.Generator().manual_seed(batch_seed(args.seed + 1, j))
            ids, labels = make_batch(2 * args.batch_size, args.seq_len, args.vocab, backend.device, g)
            total += forward_loss(model, ids, labels)
            backend.sync()
    print(f"step {step}: val loss {total.item() / args.eval_batches:.4f}", flush=True)
    model.train()


def batches(args, backend, seq_lens, ranks):
    """Yields (ids, labels) on the device; each rank its own data (seed + rank). A data straggler
    waits longer for each batch."""
    slow_data = args.straggler_rank == ranks.rank and args.straggler_kind == "data"
    delay_ms = args.loader_delay_ms + (args.straggler_ms if slow_data and args.loader else 0.0)
    for ids, labels in _batches(args, backend, seq_lens, args.seed + ranks.rank, delay_ms):
        if not args.loader:
            straggle(args, ranks, "data")
        yield ids, labels


def _batches(args, backend, seq_lens, seed, delay_ms):
    """Both paths produce the same data for the same seed."""
    if not args.loader:
        for i in range(args.steps):
            g = torch.Generator().manual_seed(batch_seed(seed, i))
            n = seq_lens[i] if seq_lens else args.seq_len
            yield make_batch(args.batch_size, n, args.vocab, device=backend.device, generator=g)
        return
    loader = make_loader(args.steps, args.batch_size, args.seq_len, args.vocab, seed,
                         args.num_workers, delay_ms, seq_lens,
                         pin_memory=backend.kind == "cuda")
    if backend.kind == "xla" and args.xla_style == "loader":
        from torch_xla.distributed.parallel_loader import MpDeviceLoader

        yield from MpDeviceLoader(loader, backend.device)  # uploads in a thread; syncs on each next()
        return
    for ids, labels in loader:
        yield ids.to(backend.device, non_blocking=True), labels.to(backend.device, non_blocking=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    ranks = discover()
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    backend = Backend(args.device)
    xla = backend.kind == "xla"
    if xla:
        backend.xm.set_rng_state(args.seed)  # dropout on XLA uses its own RNG
    model = TinyModel(**{k: getattr(args, k) for k in MODEL_KEYS}, dropout=args.dropout)
    n_params = count_parameters(model)
    model = model.to(backend.device).train()
    model, distributed = wrap(model, ranks, backend.kind)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step_fn = forward_loss
    if args.compile:
        # Measured with torch-xla 2.9: backend="openxla" mis-computes training-mode dropout (gradients
        # do not match the forward; cf. pytorch/pytorch#90097), so the loss falls far slower than eager.
        # --dropout 0 makes it match eager exactly.
        # TorchNeuron: backend="neuron" (no dynamic=True: it is rejected; fullgraph left off so that
        # --graph-break shows its graph break rather than failing).
        step_fn = torch.compile(forward_loss, backend=args.compile_backend or backend.compile_backend)
    # bf16 = autocast on every backend (fp32 master weights, same numerics as the GPU run).
    # torch.autocast("xla") works on XLA:CPU; torch_xla.amp.autocast does not (TPU/NEURON only).
    bf16 = args.precision == "bf16"
    bf16_method = f"torch.autocast({backend.kind!r}, dtype=torch.bfloat16)" if bf16 else None
    autocast = torch.autocast(backend.kind, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    dynamic = args.dynamic_shape or args.rank_dynamic_shape == ranks.rank
    seq_lens = dynamic_seq_lens(args.seq_len, args.steps, args.seed) if dynamic else None
    xla_style = args.xla_style if xla else None
    order = (f"batch i = make_batch seeded by seed*1000003+i, i=0..{args.steps - 1} in order, "
             + (f"DataLoader(num_workers={args.num_workers})" if args.loader else "no loader")
             + (f", seq_len random per step in [{min(seq_lens)},{max(seq_lens)}]" if seq_lens else ""))
    config = {
        "workload": "train", "preset": args.preset, "device": backend.kind, "device_str": str(backend.device),
        "device_hw": backend.hw, "precision": args.precision, "bf16_method": bf16_method,
        "compile": args.compile, "batch_size": args.batch_size, "seq_len": args.seq_len, "lr": args.lr,
        "seed": args.seed, "steps": args.steps, "optimizer": "AdamW", "data_order": order,
        "model": {**{k: getattr(args, k) for k in MODEL_KEYS}, "dropout": args.dropout}, "param_count": n_params,
        "loader": args.loader, "num_workers": args.num_workers, "loader_delay_ms": args.loader_delay_ms,
        "xla_style": xla_style, "graph_break": args.graph_break, "dynamic_shape": args.dynamic_shape,
        "cpu_fallback": args.cpu_fallback, "compile_backend": (args.compile_backend or backend.compile_backend) if args.compile else None,
        "target_loss": args.target_loss, "log_every": args.log_every, "torch": torch.__version__,
        "eval_every": args.eval_every, "eval_batches": args.eval_batches if args.eval_every else None,
        "world_size": ranks.world, "distributed": distributed, "save_every": args.save_every,
    }
    if ranks.rank == 0:  # as real scripts do: rank 0 speaks for the job
        print("neurondesk-config: " + json.dumps(config), flush=True)

    timer = StepTimer(backend)
    # xla-style loader syncs step k at the next() of step k+1, so its loss is ready one step later.
    log = LossLog(backend, lag=2 if xla_style == "loader" else 1)
    slow = (lambda: straggle(args, ranks, "compute")) if args.straggler_rank == ranks.rank else None
    ckpt = Checkpointer(args.save_every, args.save_dir, backend, ranks.rank)
    for step, (ids, labels) in enumerate(batches(args, backend, seq_lens, ranks), start=1):
        if step == args.crash_at_step and args.crash_rank in (None, ranks.rank):
            raise RuntimeError(f"crash requested at step {step} on rank {ranks.rank} (--crash-at-step)")
        if step == args.hang_at_step and args.hang_rank in (None, ranks.rank):
            time.sleep(args.hang_s)  # stands here; the other ranks stand in the next all-reduce
        opt.zero_grad(set_to_none=True)
        if args.cpu_fallback:
            distinct_tokens(ids)
        with autocast:
            loss = step_fn(model, ids, labels, args.graph_break, slow)
        loss.backward()
        if xla_style == "optimizer_step":
            backend.xm.optimizer_step(opt)  # reduce_gradients (no-op on 1 device) + opt.step()
            backend.xm.mark_step()
        else:
            opt.step()
            if xla_style == "sync":
                backend.torch_xla.sync()  # called here so the console attributes the step's graph to train.py
        last = step == args.steps
        if ranks.rank == 0 and (step == 1 or step % args.log_every == 0 or last):
            log.record(step, loss)
        log.poll(step)
        timer.step_done(step, ids.shape[0], ids.numel(), last)
        if args.eval_every and step % args.eval_every == 0:
            evaluate(args, backend, model, step)
        timer.leave_out(ckpt.maybe_save(step, model, opt))  # checkpoint time is not a step's (neurondesk too)
        if last:
            break
    backend.sync()
    backend.wait()
    log.flush()
    if ranks.rank == 0:
        timer.print_report()
    ckpt.close()
    finish(ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
