"""One small seam over neuron / xla / cuda / cpu: device, end-of-step sync, wait, compile counter.

``neuron`` is TorchNeuron (torch-neuronx 2.13+ on torch 2.13+, Trn2 / Trn3): a native ``neuron``
device, eager ops compiled one by one into NEFFs, ``torch.compile(backend="neuron")`` for graphs.
``xla`` is the torch-xla path (torch-neuronx 2.9 and older, trn1; PJRT_DEVICE=CPU here)."""

from __future__ import annotations

import sys

import torch


def _xla_importable() -> bool:
    try:
        import torch_xla  # noqa: F401
    except Exception:  # ImportError, or a broken install raising at import time
        return False
    return True


def _torchneuron_available() -> bool:
    """TorchNeuron is importable and gives a ``neuron`` device (an XLA-based torch-neuronx, 2.9 and
    older, imports too but registers no such device: that install takes the xla path)."""
    try:
        import torch_neuronx  # noqa: F401
    except Exception:
        return False
    module = getattr(torch, "neuron", None)
    try:
        return module is not None and bool(module.is_available())
    except Exception:
        return False


class Backend:
    def __init__(self, requested: str = "auto") -> None:
        kind = requested
        if kind == "auto":
            kind = ("neuron" if _torchneuron_available() else "xla" if _xla_importable()
                    else "cuda" if torch.cuda.is_available() else "cpu")
        self.kind = kind
        if kind == "neuron":
            if not _torchneuron_available():
                raise RuntimeError("--device neuron needs TorchNeuron (torch-neuronx 2.13+ with a neuron device)")
            import torch_neuronx
            import torch_neuronx.metrics
            self.torch_neuronx = torch_neuronx
            self.device = torch.device("neuron")
            self.hw = f"TorchNeuron {getattr(torch_neuronx, '__version__', '?')}"
        elif kind == "xla":
            import torch_xla
            import torch_xla.core.xla_model as xm

            self.torch_xla, self.xm = torch_xla, xm
            self.device = torch_xla.device()
            self.hw = xm.xla_device_hw(self.device)  # 'CPU', 'TPU', 'NEURON', ...
        elif kind == "cuda":
            self.device = torch.device("cuda")
            self.hw = torch.cuda.get_device_name()
        else:
            self.device = torch.device("cpu")
            self.hw = "CPU"

    @property
    def compile_backend(self) -> str:
        """torch.compile's backend on this device: TorchNeuron's whole-graph one, torch-xla's, Inductor."""
        return {"neuron": "neuron", "xla": "openxla"}.get(self.kind, "inductor")

    def sync(self) -> None:
        """End-of-step graph cut: launches the pending XLA graph (async); no-op elsewhere (TorchNeuron
        eager runs each op's NEFF as it comes)."""
        if self.kind == "xla":
            self.torch_xla.sync()

    def wait(self) -> None:
        """Block until the device is idle (only at timing-window boundaries)."""
        if self.kind == "xla":
            self.xm.wait_device_ops()
        elif self.kind == "neuron":
            torch.neuron.synchronize()
        elif self.kind == "cuda":
            torch.cuda.synchronize()

    def compile_count(self) -> int:
        """Graphs compiled so far: XLA uncached compiles, or TorchNeuron's NEFF compiles (its metrics,
        when TORCH_NEURONX_METRICS_ENABLED is on), plus dynamo graphs (if torch.compile ran)."""
        n = 0
        if self.kind == "xla":
            import torch_xla.debug.metrics as met

            n += met.counter_value("UncachedCompile") or 0
        elif self.kind == "neuron":
            n += self.torch_neuronx.metrics.get_counter_value("CompilationCache.TotalCompilations") or 0
        if "torch._dynamo" in sys.modules:
            from torch._dynamo.utils import counters

            n += counters["stats"]["unique_graphs"]
        return n
