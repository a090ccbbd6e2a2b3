"""Tensors of device ``neuron``: a wrapper subclass around a CPU tensor. Each ATen op on them goes
through the NEFF cache (_cache.neff_for) with its name and its tensors' shapes and dtypes, then
runs on the CPU. ``.to("neuron")`` and ``device="neuron"`` make them (a torch function mode)."""

from __future__ import annotations

import logging
import os

import torch
from torch.utils._pytree import tree_map
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from . import _cache, memory

DEVICE: torch.device | None = None
# ops that only look at or reshape a tensor's metadata: no NEFF of their own
_NO_NEFF = ("aten.detach", "aten.view", "aten._unsafe_view", "aten.t.", "aten.alias", "aten._to_copy",
            "aten.lift_fresh", "aten._local_scalar_dense", "aten.expand", "aten.clone")
# ops whose output shape depends on the data: the double runs them on the CPU and copies the result
# back, as TorchNeuron does an op its compatibility table marks CPU_FALLBACK ("Supported PyTorch APIs
# and operators", torch/reference/api/supported-operators, 2026-11-06); no NEFF. Which ops the real
# table marks so is the double's own choice. They fall back as the ops named below do.
_CPU_FALLBACK = ("aten._unique2", "aten.unique_dim", "aten.unique_consecutive")


# TORCHNEURON_DOUBLE_CPU_FALLBACK: ops (name prefixes, comma-separated) no Neuron implementation
# handles: they run on the CPU, are counted for get_fallback_ops(), and their line is logged once at
# Python's DEBUG level, as torch-neuronx's dispatcher does (invisible unless the user turns it on)
CPU_FALLBACK = _CPU_FALLBACK + tuple(x for x in os.environ.get("TORCHNEURON_DOUBLE_CPU_FALLBACK", "").split(",") if x)
FALLBACK_OPS: dict[str, int] = {}


def _falls_back(name: str) -> bool:
    if not CPU_FALLBACK or not name.startswith(CPU_FALLBACK):
        return False
    op = name.split(".")[0] + "::" + name.split(".")[1] if name.count(".") >= 1 else name
    if op not in FALLBACK_OPS:
        logging.debug(f"No implementation could handle operation {op}. Falling back on CPU")
    FALLBACK_OPS[op] = FALLBACK_OPS.get(op, 0) + 1
    return True


class NeuronTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(), dtype=elem.dtype,
                                                   device=DEVICE, requires_grad=elem.requires_grad)

    def __init__(self, elem: torch.Tensor) -> None:
        self.elem = elem
        memory.track(elem)  # device memory while it lives (a device OOM past the double's HBM)

    def __repr__(self) -> str:
        return f"tensor({self.elem.tolist()}, device='neuron:0')"

    # A traceable wrapper: torch.compile of a model on the device traces the CPU tensor inside, as
    # dynamo sees a real PrivateUse1 backend's tensors (never the double's Python dispatch).
    def __tensor_flatten__(self):
        return ["elem"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return NeuronTensor(inner["elem"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        to_cpu = name.startswith("aten._to_copy") and str(kwargs.get("device", "")) == "cpu"
        if to_cpu or name.startswith("aten._local_scalar_dense"):  # a host read waits for the pipeline
            _cache.synchronize()
        if _tracing(args):
            pass  # torch.compile tracing the graph: the neuron backend compiles it as one NEFF
        elif not name.startswith(_NO_NEFF) and not _falls_back(name):
            shapes = [f"{tuple(a.shape)}:{a.dtype}" for a in args if isinstance(a, torch.Tensor)]
            _cache.neff_for(f"{name}|{','.join(shapes)}")
        kw = {k: (torch.device("cpu") if k == "device" else _unwrap(v)) for k, v in kwargs.items()}
        out = func(*tree_map(_unwrap, args), **kw)
        return out if to_cpu else tree_map(_wrap, out)


def _tracing(args) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return any(isinstance(a, NeuronTensor) and is_fake(a.elem) for a in args)


def _unwrap(x):
    return x.elem if isinstance(x, NeuronTensor) else x


def _wrap(x):
    return NeuronTensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, NeuronTensor) else x


def _is_neuron(device) -> bool:
    try:
        return device is not None and torch.device(device).type == "neuron"
    except (RuntimeError, TypeError):
        return False


class ToNeuron(torch.overrides.TorchFunctionMode):
    """``tensor.to("neuron")``, ``module.to("neuron")`` and factories given ``device="neuron"``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():
            return func(*args, **kwargs)
        if func is torch.Tensor.to and args and not isinstance(args[0], NeuronTensor):
            target = kwargs.get("device") or next((a for a in args[1:] if isinstance(a, str | torch.device)), None)
            if _is_neuron(target):
                src = args[0]
                dtype = kwargs.get("dtype") or next((a for a in args[1:] if isinstance(a, torch.dtype)), None)
                with torch._C.DisableTorchFunction():
                    data = src.detach().to(dtype) if dtype is not None else src.detach().clone()
                return NeuronTensor(data).requires_grad_(src.requires_grad)
        if _is_neuron(kwargs.get("device")):
            kwargs = {**kwargs, "device": "cpu"}
            requires_grad = kwargs.pop("requires_grad", False)
            with torch._C.DisableTorchFunction():
                out = func(*args, **kwargs)
            return NeuronTensor(out).requires_grad_(requires_grad)
        return func(*args, **kwargs)


def install(device_module) -> None:
    """Name PrivateUse1 ``neuron``, register ``torch.neuron`` (``device_module``) and its device guard."""
    global DEVICE
    _setup_privateuseone_for_python_backend("neuron", backend_module=device_module)
    DEVICE = torch.device("neuron", 0)
    ToNeuron().__enter__()  # for the process's life, as a device backend is
