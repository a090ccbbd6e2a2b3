"""The transparency corpus: what users do with their models and optimizers, each operation one
line of output with a digest of its result (or the exception it raised). Run alone and under
`neurondesk run`, the output must be byte for byte the same: nothing of neurondesk may be
reachable from a user object (docs/design.md, the probe's rules).

    python corpus.py --mode eager|xla|compile [--only NAME,NAME]

Deterministic on purpose: a fixed seed, no timing printed, digests of saved bytes.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import os
import pickle
import sys
import tempfile
import traceback

import torch
from torch import nn

HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_state_dict_hooks",
              "_load_state_dict_pre_hooks", "_state_dict_pre_hooks", "_load_state_dict_post_hooks")
OPT_HOOK_DICTS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                  "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                  "_optimizer_load_state_dict_post_hooks")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_scripting():  # (TorchScript leaves this out)
            record_stack()
        return self.fc2(self.act(self.fc1(x)))


STACKS: list | None = None


def record_stack() -> None:
    """op_forward_stack: the frames the user's tools see (a debugger, py-spy, torch_xla's report)."""
    if STACKS is not None:
        STACKS.append(traceback.extract_stack()[:-1])


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def tensors_digest(tensors) -> str:
    h = hashlib.sha256()
    for name, t in tensors:
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def sd_digest(module_or_sd) -> str:
    sd = module_or_sd.state_dict() if isinstance(module_or_sd, nn.Module) else module_or_sd
    return tensors_digest(sorted(sd.items()))


def hook_listing(m: nn.Module) -> str:
    return ",".join(f"{n}:{len(getattr(m, n, {}) or {})}" for n in HOOK_DICTS)


def opt_state_digest(opt: torch.optim.Optimizer) -> str:
    sd = opt.state_dict()
    flat = []
    for pid, st in sorted(sd["state"].items()):
        for k, v in sorted(st.items()):
            if isinstance(v, torch.Tensor):
                flat.append((f"{pid}.{k}", v))
    groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
    return f"{tensors_digest(flat)} groups={sorted(groups[0].items())!r}"


class Corpus:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        torch.manual_seed(0)
        if mode == "xla":
            import torch_xla

            self.device = torch_xla.device()
            self.sync = torch_xla.sync
        else:
            self.device = torch.device("cpu")
            self.sync = lambda: None
        self.model = Net().to(self.device)
        self.runner = torch.compile(self.model) if mode == "compile" else self.model
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.x = torch.randn(6, 8).to(self.device)
        self.y = torch.randn(6, 4).to(self.device)
        for _ in range(3):  # train a little first: hooks and state exist by now
            self.train_step()
        with torch.no_grad():  # an evaluation forward, as scripts do between epochs
            self.model.eval()
            self.runner(self.x)
            self.model.train()
        self.sync()

    def train_step(self) -> float:
        self.opt.zero_grad()
        loss = nn.functional.mse_loss(self.runner(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.sync()
        return loss.item()

    # ---------------------------------------------------------------- operations
    def op_vars(self) -> str:
        return f"model={sorted(vars(self.model))} opt={sorted(vars(self.opt))}"

    def op_hook_listings(self) -> str:
        mods = ";".join(f"{n or '.'}={hook_listing(m)}" for n, m in self.model.named_modules())
        opt = ",".join(f"{n}:{len(getattr(self.opt, n, {}) or {})}" for n in OPT_HOOK_DICTS)
        return f"{mods} opt={opt}"

    def op_state_dict(self) -> str:
        return f"{sorted(self.model.state_dict())} {sd_digest(self.model)}"

    def op_copy(self) -> str:
        c = copy.copy(self.model)
        return f"{type(c).__name__} shares={c.fc1 is self.model.fc1} {hook_listing(c)}"

    def op_deepcopy_model(self) -> str:
        ema = copy.deepcopy(self.model)
        out = ema(self.x)
        self.sync()
        return f"{sd_digest(ema)} {tensors_digest([('out', out)])} {hook_listing(ema)}"

    def op_deepcopy_runner(self) -> str:
        return type(copy.deepcopy(self.runner)).__name__

    def op_deepcopy_optimizer(self) -> str:
        return opt_state_digest(copy.deepcopy(self.opt))

    def op_pickle_model(self) -> str:
        # pickle's bytes of a tensor differ from process to process (storage keys): the round trip is compared
        back = pickle.loads(pickle.dumps(self.model))
        return f"{type(back).__name__} {sd_digest(back)} {hook_listing(back)}"

    def op_pickle_optimizer(self) -> str:
        return opt_state_digest(pickle.loads(pickle.dumps(self.opt)))

    def op_torch_save_whole(self) -> str:
        buf = io.BytesIO()
        ema = copy.deepcopy(self.model)
        torch.save({"model": self.model, "optimizer": self.opt, "ema": ema, "step": 3}, buf)
        data = buf.getvalue()
        loaded = torch.load(io.BytesIO(data), weights_only=False)
        return f"{digest(data)} {sd_digest(loaded['model'])} {sorted(loaded)}"

    def op_torch_load_whole_weights_only(self) -> str:
        buf = io.BytesIO()
        torch.save(self.model, buf)
        try:
            torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
        except pickle.UnpicklingError as exc:  # torch refuses a whole module here, with or without us
            return f"refused ({str(exc).count('Net')} mentions of the class)"
        return "loaded"

    def op_torch_save_state_dicts(self) -> str:
        buf = io.BytesIO()
        torch.save({"model": self.model.state_dict(), "optimizer": self.opt.state_dict()}, buf)
        data = buf.getvalue()
        loaded = torch.load(io.BytesIO(data), weights_only=True)
        return f"{digest(data)} {sd_digest(loaded['model'])}"

    def op_save_to_file(self) -> str:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ckpt.pt")
            torch.save(self.model, path)
            with open(path, "rb") as f:
                data = f.read()
            back = torch.load(path, weights_only=False)
        return f"{digest(data)} {sd_digest(back)}"

    def op_save_to_missing_folder(self) -> str:
        with tempfile.TemporaryDirectory() as d:
            try:
                torch.save(self.model.state_dict(), os.path.join(d, "missing", "ckpt.pt"))
            except Exception as exc:  # noqa: BLE001 - the user's own error, whatever it is, with or without us
                return f"raised {type(exc).__name__}: {str(exc).replace(d, 'D')}"
        return "saved"

    def op_optimizer_round_trip(self) -> str:
        sd = copy.deepcopy(self.opt.state_dict())
        other = torch.optim.AdamW(self.model.parameters(), lr=1.0)
        other.load_state_dict(sd)
        return opt_state_digest(other)

    def op_apply_named_modules(self) -> str:
        seen: list[str] = []
        self.model.apply(lambda m: seen.append(type(m).__name__))
        return f"{seen} {[n for n, _ in self.model.named_modules()]}"

    def op_jit_script(self) -> str:
        scripted = torch.jit.script(self.model)
        buf = io.BytesIO()
        torch.jit.save(scripted, buf)
        return f"{type(scripted).__name__} {sd_digest(scripted)}"

    def op_jit_trace(self) -> str:
        traced = torch.jit.trace(self.model, (self.x,))
        out = traced(self.x)
        self.sync()
        return f"{type(traced).__name__} {tensors_digest([('out', out)])}"

    def op_export(self) -> str:
        ep = torch.export.export(self.model, (self.x,))
        return f"{type(ep).__name__} nodes={len(list(ep.graph.nodes))}"

    def op_compile_fresh(self) -> str:
        from torch._dynamo.utils import counters

        model = copy.deepcopy(self.model)
        compiled = torch.compile(model)
        for _ in range(3):
            compiled(self.x)
        with torch.no_grad():
            compiled(self.x)
        breaks = sum(counters["graph_break"].values())
        return f"graph_breaks={breaks} unique_graphs={counters['stats']['unique_graphs']}"

    def op_forward_stack(self) -> str:
        """The frames from this call to the model's forward, torch's own left out: nothing else."""
        global STACKS
        STACKS = []
        try:
            self.model(self.x)
            self.sync()
        finally:
            stack, STACKS = STACKS[0], None
        first = max(i for i, f in enumerate(stack) if f.name == "op_forward_stack")
        return " > ".join(f"{f.name}@{os.path.basename(f.filename)}" for f in stack[first:]
                          if f"{os.sep}torch{os.sep}" not in f.filename)

    def op_global_module_hooks(self) -> str:
        """torch's global module hooks, FlopCounterMode and ModuleTracker (built on them) see every call."""
        import torch.nn.modules.module as tm
        from torch.utils.flop_counter import FlopCounterMode
        from torch.utils.module_tracker import ModuleTracker

        seen: list[str] = []
        pre = tm.register_module_forward_pre_hook(lambda m, a: seen.append(type(m).__name__))
        post = tm.register_module_forward_hook(lambda m, a, o: seen.append("/" + type(m).__name__), always_call=True)
        try:
            self.model(self.x)
        finally:
            pre.remove()
            post.remove()
        self.model(self.x)  # removed: seen no more
        with FlopCounterMode(display=False) as flops:
            self.model(self.x)
        with ModuleTracker() as tracker:
            self.model(self.x)
            parents = sorted(tracker.parents)
        self.sync()
        return f"{seen} flops={flops.get_total_flops()} parents={parents}"

    def op_lbfgs_closure(self) -> str:
        model = copy.deepcopy(self.model)
        # on XLA each of LBFGS's host reads compiles a new graph (80 s for 2 steps of 4 on this CPU): 1 of 2 there
        rounds, iters = (1, 2) if self.mode == "xla" else (2, 4)
        opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=iters)

        def closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(self.x), self.y)
            loss.backward()
            return loss

        for _ in range(rounds):
            opt.step(closure)
        self.sync()
        return f"{sd_digest(model)} {digest(pickle.dumps(opt.state_dict()['param_groups']))}"

    def op_grad_scaler(self) -> str:
        model = copy.deepcopy(self.model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(self.device.type if self.device.type != "xla" else "cpu",
                                      enabled=self.device.type == "cpu")
        loss = nn.functional.mse_loss(model(self.x), self.y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        self.sync()
        return f"{sd_digest(model)} scale={scaler.get_scale()} {sorted(scaler.state_dict())}"

    def op_swa_averaged_model(self) -> str:
        from torch.optim.swa_utils import AveragedModel

        avg = AveragedModel(self.model)
        avg.update_parameters(self.model)
        return f"{sd_digest(avg.module)} {hook_listing(avg)}"

    def op_ddp_wrap(self) -> str:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        with tempfile.TemporaryDirectory() as d:
            dist.init_process_group("gloo", init_method=f"file://{d}/rdzv", rank=0, world_size=1)
            try:
                ddp = DDP(copy.deepcopy(self.model))
                opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
                nn.functional.mse_loss(ddp(self.x), self.y).backward()
                opt.step()
                buf = io.BytesIO()
                torch.save(ddp.module, buf)
                return f"{sd_digest(ddp.module)} {digest(buf.getvalue())} {hook_listing(ddp)}"
            finally:
                dist.destroy_process_group()

    def op_fsdp2_wrap(self) -> str:
        import torch.distributed as dist
        from torch.distributed.fsdp import fully_shard

        with tempfile.TemporaryDirectory() as d:
            dist.init_process_group("gloo", init_method=f"file://{d}/rdzv", rank=0, world_size=1)
            try:
                model = copy.deepcopy(self.model)
                fully_shard(model)
                nn.functional.mse_loss(model(self.x), self.y).backward()
                return f"{type(model).__name__} {sorted(model.state_dict())}"
            finally:
                dist.destroy_process_group()

    def op_spawn_with_model(self) -> str:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        p = ctx.Process(target=child_digest, args=(self.model, q))
        p.start()
        got = q.get()
        p.join(60)
        return f"{got} exit={p.exitcode} same={got == sd_digest(self.model)}"

    def op_dataset_and_loader(self) -> str:
        from torch.utils.data import DataLoader, TensorDataset

        ds = TensorDataset(torch.arange(24.0).reshape(12, 2))
        loader = DataLoader(ds, batch_size=4)
        batches = [b[0].sum().item() for b in loader]
        it = iter(loader)
        next(it)
        return f"{batches} {len(pickle.loads(pickle.dumps(ds)))} {len(copy.deepcopy(loader).dataset)}"

    def op_tensor_after_item(self) -> str:
        t = (self.x * 2).sum()
        t.item()
        return tensors_digest([("t", pickle.loads(pickle.dumps(t.detach().cpu())))])


def child_digest(model: nn.Module, q) -> None:
    q.put(sd_digest(model))


MODES_SKIP = {  # operations that make no sense in a mode, left out of it alone and under neurondesk
    "xla": {"op_fsdp2_wrap", "op_ddp_wrap", "op_spawn_with_model", "op_compile_fresh", "op_export",
            "op_jit_script"},
    "compile": {"op_spawn_with_model", "op_fsdp2_wrap"},
    "eager": set(),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["eager", "xla", "compile"], required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    corpus = Corpus(a.mode)
    names = [n for n in dir(Corpus) if n.startswith("op_") and n not in MODES_SKIP[a.mode]]
    if a.only:
        names = [n for n in names if n[3:] in a.only.split(",")]
    failures = 0
    for name in names:
        try:
            result = getattr(corpus, name)()
            print(f"{name[3:]}: ok {result}", flush=True)
        except Exception as exc:  # noqa: BLE001 - the corpus reports, both ways alike
            failures += 1
            print(f"{name[3:]}: raised {type(exc).__name__}", flush=True)
    losses = [round(corpus.train_step(), 6) for _ in range(2)]  # training goes on after all of it
    print(f"after: {losses} {sd_digest(corpus.model)}", flush=True)
    return 3 if failures else 0  # an exit code the runs must agree on, too


if __name__ == "__main__":
    sys.exit(main())
